// Package aio writes a file with Linux native asynchronous I/O and waits
// for the write in the runtime's network poller, through an eventfd.
//
// Why: a synced write (an O_DIRECT|O_DSYNC pwrite) blocks its thread for
// the device's write and cache flush, 0.1-0.4 ms on the benchmark host.
// A blocking system call costs a busy Go program more than its own time:
// the runtime's sysmon thread takes the P away from the blocked thread and
// wakes another thread to run it, and when the call returns the thread
// finds no P, parks, and its goroutine waits for yet another thread. With
// a thousand synced writes a second these wake-ups cost the dtx
// coordinator about as much CPU as the writes themselves. Submitted with
// io_submit, the write needs no thread while it is in flight: the
// goroutine parks in the poller like a socket read, and the kernel wakes
// the poller through the eventfd when the write (and, for O_DSYNC, the
// flush that the kernel issues after it) is done.
package aio

import "errors"

// ErrUnsupported is returned by New where native AIO is not available.
var ErrUnsupported = errors.New("aio: native asynchronous I/O is not available on this platform")

// SubmitError is a write the kernel refused to queue (io_submit failed):
// nothing was written, and a plain write may be tried instead.
type SubmitError struct{ Err error }

func (e *SubmitError) Error() string { return e.Err.Error() }
func (e *SubmitError) Unwrap() error { return e.Err }
