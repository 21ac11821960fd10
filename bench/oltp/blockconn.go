package oltp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// blockingConn is a TCP connection whose Read and Write are plain blocking
// system calls on the socket, the way a C client such as sysbench uses it:
// one OS thread per benchmark thread, asleep in the kernel until the server
// answers.
//
// Why: through Go's netpoller every round trip parks the goroutine and wakes
// it through epoll and the scheduler (more context switches and CPU per
// query than sysbench's client), and a Go process has only GOMAXPROCS
// runnable threads where sysbench has one per benchmark thread, so on a
// busy machine the kernel's fair scheduler gives it a smaller share. Both
// lower the QPS the same server shows to sluice; measured on a loaded
// 2-core machine, blocking I/O closed most of the gap to sysbench 1.0.20.
//
// Deadlines are not supported (the benchmark sets none): setting one
// returns an error, so that a caller relying on them notices.
type blockingConn struct {
	fd     int
	local  net.Addr
	remote net.Addr
}

var errNoDeadline = errors.New("blocking benchmark connection: deadlines are not supported")

// dialBlocking dials like net.Dialer, then takes the socket out of the
// netpoller and puts it in blocking mode. Anything but TCP keeps the
// ordinary connection.
func dialBlocking(ctx context.Context, network, addr string) (net.Conn, error) {
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
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil || dupErr != nil {
		return c, nil
	}
	local, remote := tc.LocalAddr(), tc.RemoteAddr()
	tc.Close() // the duplicate keeps the socket open
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &blockingConn{fd: fd, local: local, remote: remote}, nil
}

func (c *blockingConn) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError("read", err)}
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *blockingConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := syscall.Write(c.fd, b[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError("write", err)}
		}
		done += n
	}
	return done, nil
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
