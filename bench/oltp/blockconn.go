//go:build linux

package oltp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// blockingConn is a TCP connection that waits for the server the way
// sysbench's client library (MariaDB Connector/C) does: a non-blocking
// read, and when no data is there yet, poll() until there is. One OS thread
// per benchmark thread sleeps in the kernel until the server answers.
//
// Why not Go's netpoller: every round trip would park the goroutine and wake
// it through epoll and the scheduler, more context switches and client CPU
// per query than sysbench spends.
//
// Why raw system calls (raw: true): a Go thread in an ordinary system call
// that lasts 10 ms or more has its P taken by the runtime's monitor thread
// (sysmon), which then polls every 20 µs for about a millisecond before it
// backs off again. On a machine where the client competes for its CPU,
// waits that long are common, and measured there sysmon woke about 3000
// times a second (0.6 wake-ups per point select, where sysbench's process
// has none). Those wake-ups get the client's threads onto the contended CPU
// sooner than sysbench's, and sluice's QPS read 7-21 % above sysbench's
// for the same server (run side by side, in separate sessions, on a CPU
// shared with busy loops), while with raw calls it read 2-7 % below, as it
// does on an idle machine. A raw call keeps its P, so it is only used when
// every worker has a P of its own (measure raises GOMAXPROCS).
//
// The wait stays interruptible: ppoll returns EINTR when the runtime's
// preemption signal arrives (it is never restarted, whatever SA_RESTART
// says), and the calls below are not inlined, so the goroutine reaches a
// preemption check at once and a stop-the-world (GC) never waits for a
// slow server.
//
// Deadlines are not supported (the benchmark sets none): setting one
// returns an error, so that a caller relying on them notices.
type blockingConn struct {
	fd  int
	raw bool
	// One per direction (Read and Write may run at once), reused by every
	// wait, so that a wait allocates nothing.
	rpfd, wpfd pollFd
	local      net.Addr
	remote     net.Addr
}

// pollFd is struct pollfd of poll(2).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1 // POLLIN
	pollOut = 0x4 // POLLOUT
)

var errNoDeadline = errors.New("blocking benchmark connection: deadlines are not supported")

// blockingDialer returns a DialFunc that dials like net.Dialer, then takes
// the socket out of the netpoller. raw says whether its waits may keep
// their P (see blockingConn). Anything but TCP keeps the ordinary
// connection.
func blockingDialer(raw bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialBlocking(ctx, network, addr, raw)
	}
}

func dialBlocking(ctx context.Context, network, addr string, raw bool) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	_ = tc.SetNoDelay(true)
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil || dupErr != nil {
		return c, nil
	}
	local, remote := tc.LocalAddr(), tc.RemoteAddr()
	tc.Close() // the duplicate keeps the socket open
	syscall.CloseOnExec(fd)
	// Non-blocking, so that a read or write never sleeps in the kernel
	// outside the interruptible ppoll.
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &blockingConn{fd: fd, raw: raw, local: local, remote: remote}, nil
}

func (c *blockingConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, errno := sysRW(c.raw, syscall.SYS_READ, c.fd, b)
		switch errno {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if errno = c.wait(&c.rpfd, pollIn); errno != 0 {
				return 0, c.opError("read", errno)
			}
		default:
			return 0, c.opError("read", errno)
		}
	}
}

func (c *blockingConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, errno := sysRW(c.raw, syscall.SYS_WRITE, c.fd, b[done:])
		switch errno {
		case 0:
			done += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			if errno = c.wait(&c.wpfd, pollOut); errno != 0 {
				return done, c.opError("write", errno)
			}
		default:
			return done, c.opError("write", errno)
		}
	}
	return done, nil
}

// wait sleeps in ppoll until the socket is ready for events (or has failed:
// the next read or write then reports why). EINTR is not an error: the
// caller retries.
func (c *blockingConn) wait(p *pollFd, events int16) syscall.Errno {
	*p = pollFd{fd: int32(c.fd), events: events}
	if errno := sysPoll(c.raw, p); errno != syscall.EINTR {
		return errno
	}
	return 0
}

// sysRW is read(2) or write(2) on fd. Not inlined: its prologue is where a
// pending preemption is honoured between system calls.
//
//go:noinline
func sysRW(raw bool, trap uintptr, fd int, b []byte) (int, syscall.Errno) {
	var r uintptr
	var errno syscall.Errno
	if raw {
		r, _, errno = syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	} else {
		r, _, errno = syscall.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	}
	return int(r), errno
}

// sysPoll is ppoll(2) on one descriptor with no timeout and no signal mask.
//
//go:noinline
func sysPoll(raw bool, p *pollFd) syscall.Errno {
	var errno syscall.Errno
	if raw {
		_, _, errno = syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(p)), 1, 0, 0, 0, 0)
	} else {
		_, _, errno = syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(p)), 1, 0, 0, 0, 0)
	}
	return errno
}

func (c *blockingConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError(op, errno)}
}

func (c *blockingConn) Close() error {
	if c.fd < 0 {
		return nil
	}
	_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	err := syscall.Close(c.fd)
	c.fd = -1
	return err
}

func (c *blockingConn) LocalAddr() net.Addr                { return c.local }
func (c *blockingConn) RemoteAddr() net.Addr               { return c.remote }
func (c *blockingConn) SetDeadline(t time.Time) error      { return deadline(t) }
func (c *blockingConn) SetReadDeadline(t time.Time) error  { return deadline(t) }
func (c *blockingConn) SetWriteDeadline(t time.Time) error { return deadline(t) }

func deadline(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return errNoDeadline
}
