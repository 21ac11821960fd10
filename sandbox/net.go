package sandbox

import (
	"net"
	"strconv"
)

func listenLoopback(port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// FreePort asks the kernel for a free loopback port. Another process may take
// it before it is used; callers that race retry with a new one.
func FreePort() (int, error) {
	l, err := listenLoopback(0)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
