package replicate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
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
// complete data ends. log takes the messages (nil drops them); ready,
// when set, receives the listener's address.
func RunServe(ctx context.Context, t *task.Config, log *slog.Logger, ready func(addr string)) error {
	rc, err := FromTask(t)
	if err != nil {
		return err
	}
	rc.Log = log
	// The task's status, metrics and fetch serve a binlog server as well.
	tk := &Task{cfg: rc, log: rc.logger(), stage: StageRunning, started: time.Now()}
	bcfg := rc.Binlog
	bcfg.Source, bcfg.Notify = rc.Source, tk.logf
	info, err := binlog.Check(ctx, bcfg)
	if err != nil {
		return err
	}
	bcfg.Flavor, bcfg.ServerTLS = info.Flavor, info.TLS
	rc.Relay.Flavor = info.Flavor
	tk.cfg = rc
	rlog, err := relay.Open(rc.Relay)
	if err != nil {
		return err
	}
	defer rlog.Close()
	tk.rlog = rlog
	pos := rlog.End()
	if pos.File == "" {
		if pos, err = serveStart(ctx, rc, info, bcfg); err != nil {
			return err
		}
	}
	srv, ln, err := listenServe(&t.Serve, rc.Source, rlog, tk.log)
	if err != nil {
		return err
	}
	tk.logf("source %s (%s), relay in %s from %s; serving the binlog on %s", rc.Source, info.Flavor, rc.Relay.Dir, pos, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
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
		tk.logf("metrics on http://%s/metrics", addr)
	}
	tk.serving(srv, ln.Addr().String(), m)
	stop := startServe(srv, ln)
	purgeEvery, _ := time.ParseDuration(t.Serve.PurgeInterval) // checked by the task file
	g := newGroup(ctx)
	g.Go(func(ctx context.Context) error { return fetch(ctx, rlog, bcfg, pos, &tk.clocks, tk.fetching) })
	g.Go(func(ctx context.Context) error { retainServed(ctx, rlog, purgeEvery, tk.logf); return nil })
	g.Go(func(ctx context.Context) error {
		tk.statusLoop(ctx, m, func() Status { return serveStatus(tk) })
		return nil
	})
	ferr := g.Wait()
	if err := stop(); ferr == nil {
		ferr = err
	}
	st := serveStatus(tk)
	st.Serve = nil
	tk.stopped(st, ferr)
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

// listenServe builds the binlog service over rlog and opens its listener.
// Its clients' metadata queries are forwarded to src (serve/forward.go).
func listenServe(sv *task.Serve, src sluice.Endpoint, rlog *relay.Log, log *slog.Logger) (*serve.Server, net.Listener, error) {
	sc, err := serveConfig(sv)
	if err != nil {
		return nil, nil, err
	}
	sc.Source = ServeSource(src)
	srv, err := newServer(sc, ServeLog(rlog), log)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", sv.Listen)
	if err != nil {
		return nil, nil, &sluice.Error{Op: "serve: listen on " + sv.Listen, Err: err, Hint: "pick a free address for serve.listen"}
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && !sv.RequireTLS {
		log.Warn(fmt.Sprintf("serving on %s, which is not a loopback address, without serve.require-tls: replicas authenticate, but the traffic may go unencrypted", ln.Addr()))
	}
	return srv, ln, nil
}

// serveConfig is the binlog service of a task file's serve: section.
func serveConfig(sv *task.Serve) (serve.Config, error) {
	users := make([]serve.User, len(sv.Users))
	for i, u := range sv.Users {
		users[i] = serve.User{Name: u.User, Password: u.Password}
	}
	sc := serve.Config{ServerID: sv.ServerID, Users: users, RequireTLS: sv.RequireTLS}
	if sv.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(sv.TLSCert, sv.TLSKey)
		if err != nil {
			return sc, &sluice.Error{Op: "serve: load serve.tls-cert / tls-key", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "give a PEM certificate and its key"}
		}
		sc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return sc, nil
}

// newServer builds the binlog service; its own messages (a failed
// handshake, a panicked session) go to log.
func newServer(sc serve.Config, b serve.Binlog, log *slog.Logger) (*serve.Server, error) {
	srv, err := serve.New(sc, b, log)
	if err != nil {
		return nil, &sluice.Error{Op: "serve", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "fix serve: in the task file"}
	}
	return srv, nil
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
