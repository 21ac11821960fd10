//go:build !linux

package oltp

import (
	"context"
	"net"
)

// blockingDialer: sysbench-like blocking waits (blockconn.go) are
// implemented for Linux only; elsewhere --client-io blocking uses Go's
// ordinary connections.
func blockingDialer(bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
