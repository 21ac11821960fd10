//go:build linux && (amd64 || arm64)

package aio

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// iocb is struct iocb of linux/aio_abi.h (little-endian layout).
type iocb struct {
	_      uint64 // aio_data
	_      uint32 // aio_key
	_      int32  // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	buf    uint64
	nbytes uint64
	offset int64
	_      uint64 // aio_reserved2
	flags  uint32
	resfd  uint32
}

// event is struct io_event.
type event struct {
	data, obj uint64
	res, res2 int64
}

const (
	cmdPwrite   = 1
	flagResfd   = 1 << 0
	sysIOSetup  = syscall.SYS_IO_SETUP
	sysIOSubmit = syscall.SYS_IO_SUBMIT
	sysIOGetev  = syscall.SYS_IO_GETEVENTS
	sysIODestr  = syscall.SYS_IO_DESTROY
	sysEventfd2 = syscall.SYS_EVENTFD2
)

// Writer submits one write at a time to a kernel AIO context and waits
// for its completion in the poller.
type Writer struct {
	mu  sync.Mutex
	ctx uintptr
	efd *os.File
	// fd is efd's descriptor, kept here: efd.Fd() would make it blocking.
	fd uintptr
	rc syscall.RawConn
}

// New sets up an AIO context of one slot and its eventfd.
func New() (*Writer, error) {
	var ctx uintptr
	if _, _, e := syscall.RawSyscall(sysIOSetup, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, os.NewSyscallError("io_setup", e)
	}
	fd, _, e := syscall.RawSyscall(sysEventfd2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		_, _, _ = syscall.RawSyscall(sysIODestr, ctx, 0, 0)
		return nil, os.NewSyscallError("eventfd2", e)
	}
	// A non-blocking descriptor: os.NewFile puts it in the poller.
	efd := os.NewFile(fd, "aio-eventfd")
	rc, err := efd.SyscallConn()
	if err != nil {
		efd.Close()
		_, _, _ = syscall.RawSyscall(sysIODestr, ctx, 0, 0)
		return nil, err
	}
	return &Writer{ctx: ctx, efd: efd, fd: fd, rc: rc}, nil
}

// WriteAt writes b at off in f and returns once the write completed, as
// f.WriteAt would (durably, when f was opened O_DSYNC). A *SubmitError
// means the kernel refused the request and nothing was written; any other
// error is the write's own. b is referenced until WriteAt returns.
func (w *Writer) WriteAt(f *os.File, b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.efd == nil {
		return 0, os.ErrClosed
	}
	frc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	cb := &iocb{opcode: cmdPwrite, buf: uint64(uintptr(unsafe.Pointer(&b[0]))), nbytes: uint64(len(b)),
		offset: off, flags: flagResfd}
	var serr error
	err = frc.Control(func(fd uintptr) {
		cb.fildes = uint32(fd)
		cb.resfd = uint32(w.fd)
		cbs := [1]*iocb{cb}
		for {
			// io_submit of an O_DIRECT write queues it and returns: no
			// thread handoff for a call that does not block.
			_, _, e := syscall.RawSyscall(sysIOSubmit, w.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				serr = &SubmitError{Err: os.NewSyscallError("io_submit", e)}
			}
			return
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	ev, err := w.wait()
	runtime.KeepAlive(b)
	runtime.KeepAlive(cb)
	if err != nil {
		return 0, err
	}
	if ev.res < 0 {
		return 0, os.NewSyscallError("pwrite (aio)", syscall.Errno(-ev.res))
	}
	if int(ev.res) != len(b) {
		return int(ev.res), errors.New("aio: short write")
	}
	return len(b), nil
}

// wait parks until the eventfd counts a completion and reaps it.
func (w *Writer) wait() (event, error) {
	var ev event
	var zero syscall.Timespec
	for {
		var cnt [8]byte
		var rerr error
		err := w.rc.Read(func(fd uintptr) bool {
			for {
				_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&cnt[0])), 8)
				switch e {
				case 0:
					return true
				case syscall.EINTR:
					continue
				case syscall.EAGAIN:
					return false // park in the poller until the write completes
				default:
					rerr = os.NewSyscallError("read eventfd", e)
					return true
				}
			}
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return ev, err
		}
		n, _, e := syscall.RawSyscall6(sysIOGetev, w.ctx, 0, 1, uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&zero)), 0)
		if e != 0 && e != syscall.EINTR {
			return ev, os.NewSyscallError("io_getevents", e)
		}
		if n == 1 {
			return ev, nil
		}
	}
}

// Close releases the context (no write is in flight: WriteAt waits).
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.efd == nil {
		return nil
	}
	_, _, e := syscall.RawSyscall(sysIODestr, w.ctx, 0, 0)
	err := w.efd.Close()
	w.efd = nil
	if e != 0 {
		return os.NewSyscallError("io_destroy", e)
	}
	return err
}
