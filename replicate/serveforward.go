package replicate

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/serve"
)

// ServeSource lets the binlog service forward the metadata queries of its
// clients (serve/forward.go) to the task's source, with the task's source
// credentials and TLS settings.
func ServeSource(ep sluice.Endpoint) *serve.Source {
	return &serve.Source{Dial: func(ctx context.Context) (*client.Conn, error) {
		tc, fallback, err := dbconn.TLSConfig(ep, "source")
		if err != nil {
			return nil, err
		}
		network, addr := "tcp", net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
		if ep.Socket != "" {
			network, addr = "unix", ep.Socket
		}
		connect := func(tc *tls.Config) (*client.Conn, error) {
			d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
			c, err := client.ConnectWithDialer(ctx, network, addr, ep.User, ep.Password, "", d.DialContext, func(c *client.Conn) error {
				if tc != nil {
					c.SetTLSConfig(tc)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			if err := c.SetCharset("utf8mb4"); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}
		c, err := connect(tc)
		if err != nil && tc != nil && fallback {
			// tls.mode preferred: a server without TLS is talked to in plaintext.
			c, err = connect(nil)
		}
		return c, err
	}}
}
