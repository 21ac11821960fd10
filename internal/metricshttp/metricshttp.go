// Package metricshttp serves a Prometheus registry at /metrics, for the
// replication task, the binlog service and the cluster worker.
package metricshttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-db/sluice"
)

// Server serves one registry until Close.
type Server struct {
	srv  *http.Server
	done chan struct{}
	// Addr is the address bound (a port 0 in the one asked for is chosen).
	Addr string
}

// Serve listens on addr. op and hint make the one-line error when addr
// cannot be bound (hint names the setting to change).
func Serve(reg *prometheus.Registry, addr, op, hint string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: listen on %s: %v", sluice.ErrConfig, addr, err), Hint: hint}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{}), Addr: ln.Addr().String()}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops serving (a nil Server does nothing).
func (s *Server) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}
