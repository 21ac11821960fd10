package replicate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/serve"
	"github.com/sluice-db/sluice/task"
)

// RunServe runs a pure binlog server (a task file with serve: and no
// target:): the source's binlog is copied into the relay log, as for
// replication, and the relay is served over the MySQL replication
// protocol until ctx ends. A restart continues the relay where its
// complete data ends. ready, when set, receives the listener's address.
func RunServe(ctx context.Context, t *task.Config, out io.Writer, ready func(addr string)) error {
	rc, err := FromTask(t)
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(out, "serve %s: %s\n", rc.Name, fmt.Sprintf(format, a...)) }
	bcfg := rc.Binlog
	bcfg.Source, bcfg.Notify = rc.Source, logf
	info, err := binlog.Check(ctx, bcfg)
	if err != nil {
		return err
	}
	bcfg.Flavor, bcfg.ServerTLS = info.Flavor, info.TLS
	rc.Relay.Flavor = info.Flavor
	rlog, err := relay.Open(rc.Relay)
	if err != nil {
		return err
	}
	defer rlog.Close()
	pos := rlog.End()
	if pos.File == "" {
		if pos, err = serveStart(ctx, rc, info, bcfg); err != nil {
			return err
		}
	}
	srv, ln, err := listenServe(&t.Serve, rc.Source, rlog, out, logf)
	if err != nil {
		return err
	}
	logf("source %s (%s), relay in %s from %s; serving the binlog on %s", rc.Source, info.Flavor, rc.Relay.Dir, pos, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tk := &Task{cfg: rc, log: out, stage: StageRunning, started: time.Now(), rlog: rlog}
	m, err := newMetrics(rc.Name, nil)
	if err != nil {
		return err
	}
	if rc.MetricsAddr != "" {
		addr, err := m.serve(rc.MetricsAddr)
		if err != nil {
			return err
		}
		defer m.close()
		tk.metAddr = addr
		logf("metrics on http://%s/metrics", addr)
	}
	tk.serving(srv, ln.Addr().String(), m)
	stop := startServe(srv, ln)
	purgeEvery, _ := time.ParseDuration(t.Serve.PurgeInterval) // checked by the task file
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); retainServed(rctx, rlog, purgeEvery, logf) }()
	go func() { defer bg.Done(); serveStatusLoop(rctx, tk, m) }()
	ferr := tk.fetch(rctx, rlog, bcfg, pos)
	cancel()
	bg.Wait()
	if err := stop(); ferr == nil {
		ferr = err
	}
	st := serveStatus(tk)
	st.Stage, st.Serve = StageStopped, nil
	if ferr != nil {
		st.Stage, st.Error = StageFailed, oneLine(ferr)
	}
	_ = WriteStatus(rc.Dir, st)
	return ferr
}

// serveStatus is a pure binlog server's status: no applier, so the lag is
// the relay's behind the source.
func serveStatus(tk *Task) Status {
	s := tk.Status()
	s.LagSeconds = 0
	tk.mu.Lock()
	w := tk.writer
	tk.mu.Unlock()
	if w != nil {
		if _, _, lastTS, _ := w.SourceStatus(); lastTS != 0 && before(s.Relay, s.Source) {
			s.LagSeconds = lagSince(time.Now(), lastTS)
		}
	}
	return s
}

// serveStatusLoop refreshes status.json and the metrics of a pure binlog
// server until ctx ends.
func serveStatusLoop(ctx context.Context, tk *Task, m *metrics) {
	tick := time.NewTicker(tk.cfg.StatusEvery)
	defer tick.Stop()
	for {
		s := serveStatus(tk)
		m.update(s)
		_ = WriteStatus(tk.cfg.Dir, s)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// listenServe builds the binlog service over rlog and opens its listener.
// Its clients' metadata queries are forwarded to src (serve/forward.go).
func listenServe(sv *task.Serve, src sluice.Endpoint, rlog *relay.Log, out io.Writer, logf func(string, ...any)) (*serve.Server, net.Listener, error) {
	users := make([]serve.User, len(sv.Users))
	for i, u := range sv.Users {
		users[i] = serve.User{Name: u.User, Password: u.Password}
	}
	sc := serve.Config{ServerID: sv.ServerID, Users: users, RequireTLS: sv.RequireTLS, Source: ServeSource(src)}
	if sv.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(sv.TLSCert, sv.TLSKey)
		if err != nil {
			return nil, nil, &sluice.Error{Op: "serve: load serve.tls-cert / tls-key", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "give a PEM certificate and its key"}
		}
		sc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	srv, err := serve.New(sc, ServeLog(rlog), slog.New(slog.NewTextHandler(out, nil)))
	if err != nil {
		return nil, nil, &sluice.Error{Op: "serve", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "fix serve: in the task file"}
	}
	ln, err := net.Listen("tcp", sv.Listen)
	if err != nil {
		return nil, nil, &sluice.Error{Op: "serve: listen on " + sv.Listen, Err: err, Hint: "pick a free address for serve.listen"}
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && !sv.RequireTLS {
		logf("serving on %s, which is not a loopback address, without serve.require-tls: replicas authenticate, but the traffic may go unencrypted", ln.Addr())
	}
	return srv, ln, nil
}

// startServe serves until the returned stop is called; stop closes the
// listener and every connection and returns the server's error.
func startServe(srv *serve.Server, ln net.Listener) (stop func() error) {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return func() error {
		ln.Close()
		srv.Close()
		if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	}
}

// serveStart is where a new binlog server begins: the task's
// incremental start, or the source's current position.
func serveStart(ctx context.Context, rc Config, info *binlog.Info, bcfg binlog.Config) (sluice.Position, error) {
	if rc.Start.File == "" && rc.Start.GTIDSet == "" {
		return rc.Start, &sluice.Error{Op: "serve", Err: fmt.Errorf("%w: no start position and an empty relay", sluice.ErrConfig),
			Hint: "set incremental.binlog-file and binlog-pos (or incremental.gtid-set) in the task file: the service serves the binlog from there"}
	}
	return resolveStart(ctx, rc.Start, info, bcfg, rc.Source)
}

// retainServed purges the relay files older than the relay's retention
// that no replica is reading: the relay keeps the file each open reader
// (each dump in progress) is on, and every later one.
func retainServed(ctx context.Context, rlog *relay.Log, every time.Duration, logf func(string, ...any)) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		rlog.SetApplied(rlog.End()) // no applier: nothing else holds files
		removed, err := rlog.Purge(time.Now())
		if err != nil {
			logf("purge: %v", err)
		} else if len(removed) > 0 {
			logf("purged %s (no replica reads them)", strings.Join(removed, ", "))
		}
	}
}
