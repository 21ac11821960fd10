package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/httpapi"
	"github.com/sluice-db/sluice/dtx/memstore"
	"github.com/sluice-db/sluice/dtx/mysqlstore"
	"github.com/sluice-db/sluice/dtx/redisstore"
	"github.com/sluice-db/sluice/internal/every"
)

func init() { register(newDtxCmd) }

const defaultDtxListen = "127.0.0.1:36789"

func newDtxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "dtx",
		Example: `  sluice dtx serve --listen 127.0.0.1:36789
  sluice dtx query 3f1c...-gid --server http://127.0.0.1:36789`,
		Short: "Distributed transactions: a dtm-compatible saga / TCC / 2-phase message coordinator",
	}
	cmd.AddCommand(newDtxServeCmd(), newDtxQueryCmd())
	return cmd
}

func newDtxServeCmd() *cobra.Command {
	cfg := dtx.DefaultConfig()
	var listen, grpcListen, store, logLevel string
	var pprof bool
	lean := true
	leanClient, rawSyscalls := true, true
	sec := dtxSecurity{http: httpapi.DefaultConfig()}
	cmd := &cobra.Command{
		Use: "serve",
		Example: `  sluice dtx serve                                   # bolt store (--store's default) on 127.0.0.1:36789
  sluice dtx serve --store bolt:///var/lib/sluice/dtx.db
  sluice dtx serve --store 'mysql://dtx:${DTX_PW}@db1:3306/sluice_dtx' --instance node1   # password from $DTX_PW
  sluice dtx serve --store 'mysql://dtx@db1:3306/sluice_dtx?password-file=/etc/sluice/dtx.pw'
  sluice dtx serve --store 'redis://:${DTX_REDIS_PW}@cache1:6379/0'   # needs appendonly yes + appendfsync always, or ?durability=relaxed`,
		Short: "Serve dtm's HTTP protocol under /api/dtmsvr/",
		Long: `serve runs the coordinator. Programs written against dtm's client point at
http://LISTEN/api/dtmsvr and run unchanged. --store is bolt:///path/file.db
(the default, no database needed), mysql://user:password@host:port/db (the
database is created if missing; several serve processes may share it) or
redis://[user[:password]@]host:port/N, rediss:// with TLS (one Redis server,
which must sync before it answers: appendonly yes and appendfsync always, or
?durability=relaxed to accept losing acknowledged transactions if it crashes;
several serve processes may share it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDtxServeFlags(sec); err != nil {
				return err
			}
			sec.grpcListen = grpcListen
			cfg.NetHTTPClient, cfg.NoRawSyscalls, sec.http.NoRawSyscalls = !leanClient, !rawSyscalls, !rawSyscalls
			sec.probeAsked = cmd.Flags().Changed("check-branch-urls") && cfg.CheckBranchURLs
			return runDtxServe(cmd.Context(), cfg, listen, store, logLevel, pprof, lean, sec)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", defaultDtxListen, "address to serve HTTP on")
	f.StringVar(&grpcListen, "grpc-listen", "", "also serve dtm's gRPC API (dtmgrpc clients) on this address, e.g. 127.0.0.1:36790 (dtm's gRPC port)")
	f.StringVar(&store, "store", "bolt://"+defaultBoltPath(), "store URL: bolt:///path/file.db, mysql://user:password@host:port/db, redis://[user[:password]@]host:port/N (rediss:// for TLS), or mem:// (in memory, for tests: nothing survives a restart)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.Instance, "instance", cfg.Instance, "name of this coordinator in lease tokens and logs")
	f.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "timeout of one branch call")
	f.DurationVar(&cfg.RetryInterval, "retry-interval", cfg.RetryInterval, "first retry delay; doubles per failure")
	f.DurationVar(&cfg.MaxBackoff, "max-backoff", cfg.MaxBackoff, "longest retry delay")
	f.IntVar(&cfg.RetryLimit, "retry-limit", cfg.RetryLimit, "failed attempts before a branch is marked stuck (a saga action: rolled back)")
	f.DurationVar(&cfg.TimeoutToFail, "timeout-to-fail", cfg.TimeoutToFail, "how long a TCC or message may stay prepared")
	f.DurationVar(&cfg.Lease, "lease", cfg.Lease, "how long a coordinator's claim on a transaction lasts")
	f.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "how often recovery looks for due transactions")
	f.IntVar(&cfg.ClaimBatch, "claim-batch", cfg.ClaimBatch, "transactions claimed by recovery at once")
	f.IntVar(&cfg.MaxDrivers, "max-drivers", cfg.MaxDrivers, "transactions recovery drives at once")
	f.DurationVar(&cfg.Retention, "retention", cfg.Retention, "how long finished transactions are kept (0: forever)")
	f.DurationVar(&cfg.PurgeInterval, "purge-interval", cfg.PurgeInterval, "how often expired transactions are removed")
	f.IntVar(&cfg.CommitBatch, "commit-batch", cfg.CommitBatch, "most state changes group-committed in one store transaction")
	f.DurationVar(&cfg.CommitWait, "commit-wait", cfg.CommitWait, "under load, how long a store commit waits for other changes to share its sync (0: never wait)")
	f.IntVar(&cfg.CommitWorkers, "commit-workers", 0, "store transactions in flight (0: 1; more only help once batches reach --commit-batch)")
	f.BoolVar(&pprof, "pprof", false, "also serve Go's profiler under /debug/pprof/ (for benchmarks)")
	f.BoolVar(&leanClient, "lean-client", true, "call plain-HTTP branches with the hand-written keep-alive client (false: net/http's Transport for every call)")
	f.BoolVar(&rawSyscalls, "raw-syscalls", true, "read and write the lean loop's and the branch client's sockets with raw system calls (false: through net.Conn)")
	f.BoolVar(&lean, "lean-http", lean, "answer dtm client's plain keep-alive requests without net/http's per-request machinery (false: net/http serves all)")
	f.StringVar(&cfg.AlertWebhook, "alert-webhook", "", "POST dtm's alert JSON (gid, status, branch, error, retry_count) here whenever a branch has failed --alert-retry-limit times in a row or more")
	f.IntVar(&cfg.AlertRetryLimit, "alert-retry-limit", cfg.AlertRetryLimit, "consecutive failures of a branch before --alert-webhook is called")
	f.BoolVar(&cfg.CheckBranchURLs, "check-branch-urls", cfg.CheckBranchURLs, "refuse (400) branch URLs whose host does not accept connections; only with --token-file (or SLUICE_DTX_TOKEN), since the answer tells the caller which host:ports are open")
	f.StringSliceVar(&cfg.BranchHosts, "branch-hosts", nil, "hosts branch URLs may reach: CIDRs, addresses, host names, *.domain patterns, * (comma-separated or repeated); default: any host but link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata services, which are denied unless listed by name or a CIDR inside them")
	f.StringVar(&sec.tokenFile, "token-file", "", "require 'Authorization: Bearer TOKEN' on every API call, TOKEN being this file's first line (or set SLUICE_DTX_TOKEN); /metrics stays open")
	f.IntVar(&sec.maxConns, "max-conns", 10000, "most client connections open at once; past it the connection idle the longest is closed to make room (new ones wait only while every one serves a request)")
	f.DurationVar(&sec.headerTimeout, "read-header-timeout", 10*time.Second, "a connection whose request header has not arrived this long after it opened (or after its first byte) is closed")
	f.IntVar(&sec.maxConnsPerClient, "max-conns-per-client", 1024, "most connections open at once from one client address; past it that client's connection idle the longest is closed (one silent since it opened only after 1 s; a new one is refused while all of them serve requests or are that new); 0: no bound")
	f.Int64Var(&sec.http.MaxInflightBody, "max-inflight-body", sec.http.MaxInflightBody, "most request-body bytes held by requests in flight, all clients together; past it a request is answered 503 with Retry-After (one request alone is always served); 0: no bound")
	f.Int64Var(&sec.memLimit, "memory-limit", 256<<20, "soft memory limit in bytes (Go's GOMEMLIMIT, which overrides it); 0: none")
	f.BoolVar(&cfg.TestHooks, "test-hooks", false, "for dtm's own test suite only (make test-dtm-conformance): no background recovery, and routes under /api/dtmsvr/test/ that run it by hand; loopback addresses only")
	_ = f.MarkHidden("test-hooks")
	return cmd
}

func defaultBoltPath() string {
	return sluiceHomeFile("dtx.db")
}

func sluiceHomeFile(name string) string {
	if d := os.Getenv("SLUICE_HOME"); d != "" {
		return d + "/" + name
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h + "/.sluice/" + name
	}
	return ".sluice/" + name
}

// openDtxStore opens the store a --store URL names.
func openDtxStore(ctx context.Context, raw string) (dtx.Store, string, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		// The URL is not printed: it may hold a password.
		return nil, "", sluice.Errorf(sluice.ErrConfig, "dtx --store", "use bolt:///path/file.db or mysql://user:password@host:port/db", "not a URL (no scheme://)")
	}
	if scheme == "mysql" {
		cfg, err := mysqlstore.ParseURL(raw)
		if err != nil {
			return nil, "", err
		}
		s, err := mysqlstore.Open(ctx, cfg)
		return s, "mysql", err
	}
	if scheme == "redis" || scheme == "rediss" {
		cfg, err := redisstore.ParseURL(raw)
		if err != nil {
			return nil, "", err
		}
		s, err := redisstore.Open(ctx, cfg)
		if err != nil {
			return nil, "", err
		}
		return s, cfg.String(), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", sluice.Errorf(sluice.ErrConfig, "dtx --store", "use bolt:///path/file.db or mysql://user:password@host:port/db", "bad URL")
	}
	switch u.Scheme {
	case "bolt":
		p := u.Path
		if u.Host != "" { // bolt://relative/path
			p = u.Host + p
		}
		if p == "" {
			return nil, "", sluice.Errorf(sluice.ErrConfig, "dtx --store", "give a file: bolt:///path/file.db", "no file in %q", raw)
		}
		s, err := boltstore.Open(p)
		if err != nil && !isSluiceError(err) {
			// A directory that cannot be made, a file that is no bolt
			// database: the store's error had no fix.
			return nil, "", &sluice.Error{Op: "dtx --store " + p, Err: err, Hint: "give a bolt file this user can create and write, in a directory it can make: bolt:///path/file.db"}
		}
		return s, "bolt", err
	case "mem":
		// For tests and trying it out: nothing survives the process.
		return memstore.New(), "memory (nothing survives a restart)", nil
	}
	return nil, "", sluice.Errorf(sluice.ErrConfig, "dtx --store", "use bolt:///path/file.db, mysql://user:password@host:port/db, redis://host:port/N or mem:// (tests only)", "unknown store scheme %q", u.Scheme)
}

// reclaimEvery is how often dtx serve looks for memory to give back.
var reclaimEvery = time.Minute

// startReclaim looks every period for memory to give back to the OS, until
// the returned stop is called; stop returns once the loop has ended
// (Ticker.Stop does not close its channel, so ranging over it never ends).
func startReclaim(period time.Duration) (stop func()) {
	return every.Start(period, func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > 64<<20 || ms.HeapIdle-ms.HeapReleased > 32<<20 {
			debug.FreeOSMemory()
		}
	})
}

func runDtxServe(ctx context.Context, cfg dtx.Config, listen, storeURL, logLevel string, pprof, lean bool, sec dtxSecurity) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		return sluice.Errorf(sluice.ErrConfig, "dtx serve --log-level", "use debug, info, warn or error", "%v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	store, kind, err := openDtxStore(ctx, storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	if os.Getenv("GOGC") == "" {
		// The coordinator's heap is small and short-lived (requests, log
		// records): collecting it less often saves CPU that the business
		// services on the same host need, for a few more MB of memory.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" && sec.memLimit > 0 {
		// A soft limit: past it the collector runs more often and returns
		// memory to the OS, so a burst (thousands of connections, say)
		// does not leave the idle coordinator holding its peak (issue 16:
		// 420 MB idle; half-sent requests now also end after ReadTimeout).
		debug.SetMemoryLimit(sec.memLimit)
	}
	// With GOGC at 400 and no allocation while idle, no collection runs and
	// the garbage of a burst stays in the heap: now and then, a heap grown
	// past 64 MB or holding over 32 MB not returned is collected and given
	// back to the OS.
	defer startReclaim(reclaimEvery)()
	if cfg.CommitWorkers == 0 {
		// One store transaction at a time fills batches best: changes that
		// arrive while it commits share the next one. More workers only
		// help once batches reach --commit-batch.
		cfg.CommitWorkers = 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	token, err := sec.token()
	if err != nil {
		return err
	}
	if err := sec.http.Validate(); err != nil {
		return err
	}
	if err := probePolicy(&cfg, token, sec.probeAsked, log); err != nil {
		return err
	}
	coord, err := dtx.New(cfg, store, reg, log)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		coord.Close()
		return &sluice.Error{Op: "dtx serve: listen on " + listen, Err: err, Hint: "pick a free address with --listen"}
	}
	if cfg.TestHooks && !loopbackAddr(ln.Addr()) {
		ln.Close()
		coord.Close()
		return &sluice.Error{Op: "dtx serve", Err: fmt.Errorf("%w: --test-hooks on %s, which is not a loopback address", sluice.ErrConfig, ln.Addr()), Hint: "--test-hooks is for dtm's test suite on this machine: listen on 127.0.0.1"}
	}
	if token == "" && !loopbackAddr(ln.Addr()) {
		log.Warn("dtx: serving on a non-loopback address without --token-file: anyone who reaches it can submit, stop and abort transactions and make sluice call any URL", "listen", ln.Addr().String())
	}
	if len(cfg.BranchHosts) == 0 && !loopbackAddr(ln.Addr()) {
		log.Warn("dtx: serving on a non-loopback address without --branch-hosts: branch URLs may name any host but link-local and metadata addresses, loopback and private ones included", "listen", ln.Addr().String())
	}
	ln = httpapi.NewSlotListener(ln, httpapi.SlotConfig{Max: sec.maxConns, PerClient: sec.maxConnsPerClient})
	if err := coord.Start(); err != nil {
		ln.Close()
		coord.Close()
		return err
	}
	api := httpapi.NewHandler(coord, reg, sec.http)
	handler := api
	if pprof {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
		// A prefix test, not a mux in front of every call: with --pprof the
		// benchmarks profile the coordinator, and the profile should show
		// the request path as it is without --pprof.
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/debug/pprof/") || r.URL.Path == "/debug/pprof" {
				mux.ServeHTTP(w, r)
				return
			}
			api.ServeHTTP(w, r)
		})
	}
	if token != "" {
		handler = bearer(handler, token)
		lean = false // the lean loop reads no Authorization header
	}
	// A client that sends half a request, or holds an idle connection, is
	// dropped in bounded time (10,000 half-sent requests stayed open).
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: sec.headerTimeout, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ConnState: httpapi.ConnState} // which connections serve a request, for the connection slots
	var server interface {
		Serve(net.Listener) error
		Shutdown(context.Context) error
	} = srv
	if lean {
		// dtm client's calls by httpapi's lean loop, everything else (other
		// routes, /metrics, pprof, unusual requests) by srv.
		server = httpapi.NewServer(srv, api)
	}
	errc := make(chan error, 2)
	if sec.grpcListen != "" {
		gs, gln, err := listenDtxGRPC(coord, sec.grpcListen, token, cfg.TestHooks, log)
		if err != nil {
			ln.Close()
			coord.Close()
			return err
		}
		defer gs.Stop()
		log.Info("dtx: serving dtm's gRPC protocol", "listen", gln.Addr().String())
		go func() { errc <- gs.Serve(gln) }()
	}
	log.Info("dtx: serving dtm's HTTP protocol", "listen", ln.Addr().String(), "store", kind, "instance", cfg.Instance)
	go func() { errc <- server.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = server.Shutdown(sctx)
	coord.Close()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newDtxQueryCmd() *cobra.Command {
	var server, store string
	cmd := &cobra.Command{
		Use: "query GID",
		Example: `  sluice dtx query 3f1c0d2e-gid
  sluice dtx query 3f1c0d2e-gid --server http://10.0.0.5:36789`,
		Short: "Show a global transaction and its branches",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := dtxQuery(cmd.Context(), server, store, args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&server, "server", "http://"+defaultDtxListen, "coordinator to ask")
	cmd.Flags().StringVar(&store, "store", "", "read the store directly instead (bolt:// only while no server has it open, mysql:// or redis://)")
	return cmd
}

// dtxQuery prints the same JSON as GET /api/dtmsvr/query.
func dtxQuery(ctx context.Context, server, store, gid string) ([]byte, error) {
	if store != "" {
		s, _, err := openDtxStore(ctx, store)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		g, bs, err := s.Get(ctx, gid)
		if errors.Is(err, dtx.ErrNotFound) {
			return nil, &sluice.Error{Op: "dtx query " + gid, Err: err, Hint: "check the gid"}
		}
		if err != nil {
			return nil, err
		}
		return json.MarshalIndent(map[string]any{"transaction": g, "branches": bs}, "", "  ")
	}
	u := strings.TrimRight(server, "/") + "/api/dtmsvr/query?gid=" + url.QueryEscape(gid)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &sluice.Error{Op: "dtx query " + gid, Err: fmt.Errorf("%w: --server %q: %v", sluice.ErrConfig, server, err), Hint: "give the coordinator's URL, e.g. --server http://127.0.0.1:36789"}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, &sluice.Error{Op: "dtx query " + gid, Err: fmt.Errorf("%w: %v", sluice.ErrUnreachable, err), Hint: "start sluice dtx serve or pass --server"}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, &sluice.Error{Op: "dtx query " + gid, Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body))), Hint: "check the gid and --server"}
	}
	var v struct {
		Transaction json.RawMessage `json:"transaction"`
		Branches    json.RawMessage `json:"branches"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	if string(v.Transaction) == "null" {
		return nil, &sluice.Error{Op: "dtx query " + gid, Err: dtx.ErrNotFound, Hint: "check the gid"}
	}
	var pretty any
	_ = json.Unmarshal(body, &pretty)
	out, err := json.MarshalIndent(pretty, "", "  ")
	return append(out, '\n'), err
}
