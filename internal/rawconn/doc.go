// Package rawconn reads and writes a TCP connection with raw system calls,
// still waiting for readiness in the runtime's network poller.
//
// Why: a read or write through net.Conn enters the Go scheduler's syscall
// state, and whenever every P was idle before it, entering that state wakes
// the runtime's sysmon thread and resets its sleep to 20 µs. A coordinator
// that idles between short bursts of socket I/O (the dtx coordinator under
// load) then keeps sysmon waking thousands of times a second: perf put 22 %
// of the coordinator's CPU in sysmon and its context switches. A read or
// write on a non-blocking socket never blocks, so it needs no syscall state;
// when the socket is not ready, the call returns EAGAIN and the goroutine
// parks in the poller as net.Conn's would, deadlines included.
package rawconn
