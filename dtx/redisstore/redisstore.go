// Package redisstore is a dtx store on a single Redis server, for users who
// pick dtm's Redis store for its speed. Every write is one Lua script, so
// a batch of mutations (one group commit of the coordinator) and a Claim
// are atomic: no other client sees half of either.
//
// Durability is the server's: a batch is on disk when Apply returns only
// if the server has `appendonly yes` and `appendfsync always` (Redis then
// fsyncs its append-only file before it answers). Open checks both with
// CONFIG GET and refuses a server that would lose acknowledged
// transactions in a crash, unless the URL says ?durability=relaxed.
//
// One Redis server only: the scripts name keys they were not passed, which
// Redis Cluster does not allow, and a replica that takes over after a
// failover may lack the last acknowledged writes.
//
// Keys, under Config.Prefix (default "sluice:dtx:"):
//
//	g:GID      hash: s status, t type, o owner, l lease (unix ns), r "1" when the
//	           type keeps its branches (dtx.KeepsBranches), d the transaction as JSON
//	b:GID      list: the kept branches (TCC, XA, workflow) as JSON, in order;
//	           a saga's or message's are derived from its steps (dtx.GenBranches)
//	k:GID      set: BranchKey of each registered branch (a retried register adds none)
//	u:GID      hash: branch statuses a mutation set that its transaction row does not hold
//	all        sorted set, score 0: every gid (List)
//	due        sorted set: unfinished, not stuck transactions by max(NextCronTime, LeaseUntil), unix µs (Claim)
//	fin        sorted set: finished transactions by FinishTime, unix µs (Purge)
//	r:ID       an applied batch's outcome for a minute, so that a retry after a lost reply gets it
//	kv:CAT\0K  hash: one key-value entry (topics); kvc:CAT and kva index them; kvseq numbers them
//	layout     the layout's version
package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
)

// Durability modes.
const (
	// Durable (the default) requires appendonly yes and appendfsync always.
	Durable = "durable"
	// Relaxed accepts any persistence setting: a crash of the Redis server
	// (or of its machine) may lose transactions it acknowledged, as with
	// dtm's Redis store.
	Relaxed = "relaxed"
)

// DefaultPrefix starts every key the store writes.
const DefaultPrefix = "sluice:dtx:"

// Config says where the store lives. Its String method hides the password.
type Config struct {
	Addr     string // host:port
	Username string // an ACL user ("": default)
	Password string
	DB       int
	// TLS, when set, encrypts the connections (rediss://).
	TLS *tls.Config
	// Prefix starts every key.
	Prefix string
	// Durability is Durable or Relaxed.
	Durability string
	// PoolSize bounds the connections.
	PoolSize int
	// Timeout bounds a connect, and the wait for a connection of the pool.
	Timeout time.Duration
}

// DefaultConfig is a durable store on 127.0.0.1:6379, database 0.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:6379", Prefix: DefaultPrefix, Durability: Durable, PoolSize: 32, Timeout: 5 * time.Second}
}

// String describes the config without its password.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = " password=(hidden)"
	}
	tls := ""
	if c.TLS != nil {
		tls = " tls"
	}
	user := ""
	if c.Username != "" {
		user = fmt.Sprintf(" user=%q", c.Username)
	}
	return fmt.Sprintf("redis %s db=%d%s%s%s prefix=%q durability=%s", c.Addr, c.DB, user, pw, tls, c.Prefix, c.Durability)
}

// GoString is String, so that %#v hides the password too.
func (c Config) GoString() string { return c.String() }

const urlHint = "use redis://[user[:password]@]host:port/N or rediss:// (TLS); the password may be ${VAR} or ?password-file=PATH"

// Validate checks the config.
func (c Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil || host == "" || port == "" {
		return sluice.Errorf(sluice.ErrConfig, "dtx redis store", urlHint, "host and port are required")
	}
	if c.DB < 0 {
		return sluice.Errorf(sluice.ErrConfig, "dtx redis store", urlHint, "bad database number %d", c.DB)
	}
	if c.Durability != Durable && c.Durability != Relaxed {
		return sluice.Errorf(sluice.ErrConfig, "dtx redis store", "use ?durability=relaxed, or leave it out", "unknown durability %q", c.Durability)
	}
	if c.Prefix == "" || c.PoolSize <= 0 || c.Timeout <= 0 {
		return sluice.Errorf(sluice.ErrConfig, "dtx redis store", "give a non-empty prefix and a positive pool size", "bad prefix or pool size")
	}
	return nil
}

// envPassword matches a password given as ${VAR} in a store URL.
var envPassword = regexp.MustCompile(`^(rediss?://[^:@/]*):\$\{([A-Za-z_][A-Za-z0-9_]*)\}@`)

// ParseURL reads redis://[user[:password]@]host:port/N[?options], or
// rediss:// for TLS. The password need not be in the URL, where ps shows
// it: ${VAR} reads it from the environment and ?password-file=PATH from a
// file (its first line). Errors never print it. Options: durability=relaxed,
// prefix=P, pool-size=N, password-file=PATH, and for rediss:// tls-ca,
// tls-cert, tls-key (PEM files) and tls-mode (verify-identity, the default;
// verify-ca: the chain only; required: encrypt, verify nothing).
func ParseURL(raw string) (Config, error) {
	c := DefaultConfig()
	var fromEnv string
	if m := envPassword.FindStringSubmatch(raw); m != nil {
		fromEnv = m[2]
		raw = m[1] + ":-@" + raw[len(m[0]):]
	}
	bad := func(format string, args ...any) error {
		return sluice.Errorf(sluice.ErrConfig, "dtx --store", urlHint, format, args...)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Opaque != "" {
		return c, bad("bad URL")
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if fromEnv != "" {
		v, ok := os.LookupEnv(fromEnv)
		if !ok {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "export "+fromEnv+" before starting sluice", "the password's variable ${%s} is not set", fromEnv)
		}
		c.Password = v
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "password-file", "durability", "prefix", "pool-size":
		case "tls-ca", "tls-cert", "tls-key", "tls-mode":
			if u.Scheme != "rediss" {
				return c, bad("%s needs rediss:// (TLS)", k)
			}
		default:
			return c, bad("unknown option %q (known: durability, prefix, pool-size, password-file, tls-ca, tls-cert, tls-key, tls-mode)", k)
		}
	}
	if f := q.Get("password-file"); f != "" {
		if fromEnv != "" || c.Password != "" {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "give the password once: in the URL, as ${VAR}, or as ?password-file=PATH", "two passwords")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return c, sluice.Errorf(sluice.ErrConfig, "dtx --store", "make password-file name a file sluice can read", "read password file: %v", err)
		}
		c.Password, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
	}
	if d := q.Get("durability"); d != "" {
		c.Durability = d
	}
	if p, ok := q["prefix"]; ok {
		c.Prefix = p[0]
	}
	if p := q.Get("pool-size"); p != "" {
		if c.PoolSize, err = strconv.Atoi(p); err != nil || c.PoolSize <= 0 {
			return c, bad("bad pool-size %q", p)
		}
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "6379"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return c, bad("bad port %q", port)
	}
	if host == "" {
		return c, bad("no host")
	}
	c.Addr = net.JoinHostPort(host, port)
	if db := strings.Trim(u.Path, "/"); db != "" {
		if c.DB, err = strconv.Atoi(db); err != nil || c.DB < 0 {
			return c, bad("bad database number %q (a number, 0 to 15 on a default server)", db)
		}
	}
	if u.Scheme == "rediss" {
		if c.TLS, err = tlsConfig(host, q); err != nil {
			return c, err
		}
	}
	return c, c.Validate()
}

func tlsConfig(host string, q url.Values) (*tls.Config, error) {
	bad := func(format string, args ...any) error {
		return sluice.Errorf(sluice.ErrConfig, "dtx --store", "rediss:// takes tls-mode=verify-identity|verify-ca|required and tls-ca, tls-cert, tls-key: readable PEM files", format, args...)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if cert, key := q.Get("tls-cert"), q.Get("tls-key"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return nil, bad("tls-cert and tls-key go together")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, bad("client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if ca := q.Get("tls-ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, bad("tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, bad("tls-ca: %s holds no PEM certificate", ca)
		}
	}
	switch mode := q.Get("tls-mode"); mode {
	case "", "verify-identity":
	case "required":
		cfg.InsecureSkipVerify = true
	case "verify-ca":
		if cfg.RootCAs == nil {
			return nil, bad("tls-mode=verify-ca needs tls-ca")
		}
		// The chain is checked; the name is not.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, len(raw))
			for i, b := range raw {
				c, err := x509.ParseCertificate(b)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			if len(certs) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, bad("unknown tls-mode %q", mode)
	}
	return cfg, nil
}

// Store is a dtx.Store and dtx.KVStore on one Redis server.
type Store struct {
	c        *redis.Client
	cfg      Config
	prefix   string
	verified atomic.Bool // Open found the server durable
	// refused is why a later connection was refused (with its fix).
	refused atomic.Pointer[sluice.Error]
}

// debugLogger sends go-redis's own messages (a failed dial, say) to the
// debug log: the store's errors report what matters, once.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "dtx redis store client: "+fmt.Sprintf(format, v...))
}

var logOnce sync.Once

// layoutVersion names the key layout above; Open refuses another.
const layoutVersion = "1"

// Open connects and checks that the server keeps what it acknowledges
// (unless cfg.Durability is Relaxed).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, prefix: cfg.Prefix}
	opt := &redis.Options{
		Addr:      cfg.Addr,
		Username:  cfg.Username,
		Password:  cfg.Password,
		DB:        cfg.DB,
		TLSConfig: cfg.TLS,
		// RESP2 and no client-side extras: the scripts' replies are plain
		// arrays, and a Redis older than 7.2 knows no CLIENT SETINFO.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// The store retries by itself, only what is safe to run twice
		// (Apply carries a batch id for that).
		MaxRetries:            -1,
		PoolSize:              cfg.PoolSize,
		DialTimeout:           cfg.Timeout,
		PoolTimeout:           cfg.Timeout,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		ContextTimeoutEnabled: true,
	}
	if cfg.Durability == Durable {
		// Every later connection checks again: a server restarted with
		// another configuration is refused, not trusted.
		opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
			if !s.verified.Load() {
				return nil // Open checks, and reports with the fix
			}
			err := s.checkDurable(ctx, cn)
			var se *sluice.Error
			if errors.As(err, &se) {
				s.refused.Store(se) // go-redis passes on only its cause
			}
			return err
		}
	}
	logOnce.Do(func() { redis.SetLogger(debugLogger{}) })
	s.c = redis.NewClient(opt)
	octx, cancel := context.WithTimeout(ctx, cfg.Timeout+5*time.Second)
	defer cancel()
	if err := s.c.Ping(octx).Err(); err != nil {
		s.c.Close()
		return nil, s.connectError(err)
	}
	var err error
	if cfg.Durability == Durable {
		err = s.checkDurable(octx, s.c)
	} else if err = s.checkEviction(octx, s.c); errors.Is(err, errNoConfig) {
		// Eviction loses transactions without any crash: refuse it even
		// when relaxed, if the server lets us look.
		err = nil
	}
	if err != nil {
		s.c.Close()
		return nil, s.connectError(err)
	}
	s.verified.Store(true)
	layout := s.prefix + "layout"
	if err := s.c.SetNX(octx, layout, layoutVersion, 0).Err(); err != nil {
		s.c.Close()
		return nil, s.connectError(err)
	}
	if v, err := s.c.Get(octx, layout).Result(); err != nil {
		s.c.Close()
		return nil, s.connectError(err)
	} else if v != layoutVersion {
		s.c.Close()
		return nil, sluice.Errorf(sluice.ErrConfig, "dtx redis store", "use another ?prefix= or a newer sluice", "the keys under %q have layout %q; this sluice knows %q", s.prefix, v, layoutVersion)
	}
	return s, nil
}

// connectError explains a failure to reach or use the server. go-redis's
// errors name the address, never the password.
func (s *Store) connectError(err error) error {
	op := "dtx redis store " + s.cfg.Addr
	var se *sluice.Error
	switch {
	case errors.As(err, &se):
		return err
	case redis.HasErrorPrefix(err, "WRONGPASS"), redis.HasErrorPrefix(err, "NOAUTH"), redis.HasErrorPrefix(err, "NOPERM"):
		return &sluice.Error{Op: op, Err: err, Hint: "give the user and password Redis expects (redis://user:${VAR}@host:port/N or ?password-file=PATH) and the ACL rights on its keys: +@read +@write +@scripting +@transaction +select +ping +config|get"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &sluice.Error{Op: op, Err: err, Hint: "start Redis there, or fix the host and port of --store"}
	case redis.HasErrorPrefix(err, "DB index"), redis.HasErrorPrefix(err, "invalid DB index"):
		return &sluice.Error{Op: op, Err: err, Hint: "pick a database number the server has (its `databases` setting)"}
	}
	return &sluice.Error{Op: op, Err: err, Hint: "check that Redis runs there and that --store names it"}
}

var errNoConfig = errors.New("CONFIG GET is not allowed")

type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

func configGet(ctx context.Context, c configGetter, pattern string) (map[string]string, error) {
	m, err := c.ConfigGet(ctx, pattern).Result()
	var re redis.Error
	if errors.As(err, &re) {
		// NOPERM (ACL), an unknown command (renamed CONFIG): we cannot tell.
		return nil, fmt.Errorf("%w: %v", errNoConfig, err)
	}
	return m, err
}

// checkDurable refuses a server that may lose what it acknowledged: Redis
// fsyncs its append-only file before it answers only with appendonly yes
// and appendfsync always.
func (s *Store) checkDurable(ctx context.Context, c configGetter) error {
	const relaxed = "add ?durability=relaxed to --store to accept losing acknowledged transactions when Redis crashes"
	op := "dtx redis store " + s.cfg.Addr
	m, err := configGet(ctx, c, "append*")
	if errors.Is(err, errNoConfig) {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: cannot verify that the server syncs before it answers: %v", sluice.ErrConfig, err),
			Hint: "let this user run CONFIG GET (ACL +config|get), or " + relaxed}
	}
	if err != nil {
		return err
	}
	if m["appendonly"] != "yes" || m["appendfsync"] != "always" {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the server is not durable (appendonly %s, appendfsync %s): a crash would lose transactions it acknowledged", sluice.ErrConfig, m["appendonly"], m["appendfsync"]),
			Hint: "set `appendonly yes` and `appendfsync always` in redis.conf (or CONFIG SET both, then CONFIG REWRITE), or " + relaxed}
	}
	// With no-appendfsync-on-rewrite yes, Redis does not fsync while a
	// snapshot or an AOF rewrite runs in the background.
	if m, err = configGet(ctx, c, "no-appendfsync-on-rewrite"); err != nil {
		return err
	}
	if m["no-appendfsync-on-rewrite"] == "yes" {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the server is not durable (no-appendfsync-on-rewrite yes): a crash during a background rewrite or snapshot would lose transactions it acknowledged", sluice.ErrConfig),
			Hint: "set `no-appendfsync-on-rewrite no` (the default), or " + relaxed}
	}
	return s.checkEviction(ctx, c)
}

// checkEviction refuses a server that may evict keys without an expiry:
// that loses transactions with no crash at all.
func (s *Store) checkEviction(ctx context.Context, c configGetter) error {
	m, err := configGet(ctx, c, "maxmemory*")
	if err != nil {
		return err
	}
	if p := m["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") && m["maxmemory"] != "0" {
		return &sluice.Error{Op: "dtx redis store " + s.cfg.Addr, Err: fmt.Errorf("%w: maxmemory-policy %s evicts keys, transactions among them", sluice.ErrConfig, p),
			Hint: "set maxmemory-policy noeviction (or a volatile-* policy: the store sets no expiry on transactions), or use a Redis server of its own"}
	}
	return nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.c.Close() }

// retryable tells whether a failed call may have failed for want of a
// connection (a server restarting, a connection cut): not a reply.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		return redis.HasErrorPrefix(err, "LOADING") || redis.HasErrorPrefix(err, "BUSY")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// retryFor bounds how long a call that is safe to repeat is retried while
// the server cannot be reached (a restart loads the append-only file); an
// applied batch's outcome outlives it (a minute).
const retryFor = 5 * time.Second

// run runs script, again while retryable errors say the server could not
// be reached, when again is true (the script is safe to run twice).
func (s *Store) run(ctx context.Context, script *redis.Script, again bool, args ...any) (any, error) {
	deadline := time.Now().Add(retryFor)
	wait := 10 * time.Millisecond
	for {
		v, err := script.Run(ctx, s.c, nil, args...).Result()
		if err == nil || !again || !retryable(err) || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		if wait < 500*time.Millisecond {
			wait *= 2
		}
	}
}

func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	if r := s.refused.Load(); r != nil && errors.Is(err, sluice.ErrConfig) {
		return r
	}
	return fmt.Errorf("dtx redis store %s: %w", s.cfg.Addr, err)
}

// Times are kept as unix ns (exact) in the hashes, and as unix µs in the
// sorted sets' scores, which are doubles: µs are exact integers there
// until the year 2255.

func ns(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func fromNS(v string) time.Time {
	n, _ := strconv.ParseInt(v, 10, 64)
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// usCeil is t in µs rounded up: a score at or below usFloor(now) is
// then due at or before now.
func usCeil(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return strconv.FormatInt(us, 10)
}

func usFloor(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// scores derives a transaction's index entries, as mysqlstore's columns:
// due is "" when recovery should never claim it (finished or stuck, or no
// next cron time), fin is "" while it is unfinished.
func scores(g *dtx.Global) (due, fin string) {
	if g.Finished() {
		return "", usFloor(g.FinishTime)
	}
	if g.Stuck != "" || g.NextCronTime.IsZero() {
		return "", ""
	}
	d := g.NextCronTime
	if g.LeaseUntil.After(d) {
		d = g.LeaseUntil
	}
	return usCeil(d), ""
}

func decodeGlobal(doc, owner, lease any) (*dtx.Global, error) {
	d, ok := doc.(string)
	if !ok {
		return nil, dtx.ErrNotFound
	}
	g := &dtx.Global{}
	if err := json.Unmarshal([]byte(d), g); err != nil {
		return nil, fmt.Errorf("decode transaction: %w", err)
	}
	// The fields are authoritative: Claim changes them without the document.
	o, _ := owner.(string)
	l, _ := lease.(string)
	g.Owner, g.LeaseUntil = o, fromNS(l)
	return g, nil
}

// Get returns a transaction and its branches in order: a TCC's (or
// workflow's) as registered, a saga's or message's derived from its steps, with the
// statuses the mutations recorded.
func (s *Store) Get(ctx context.Context, gid string) (*dtx.Global, []dtx.Branch, error) {
	var hm *redis.SliceCmd
	var lr *redis.StringSliceCmd
	var ur *redis.MapStringStringCmd
	get := func() error {
		_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			hm = p.HMGet(ctx, s.prefix+"g:"+gid, "d", "o", "l")
			lr = p.LRange(ctx, s.prefix+"b:"+gid, 0, -1)
			ur = p.HGetAll(ctx, s.prefix+"u:"+gid)
			return nil
		})
		return err
	}
	err := get()
	for deadline := time.Now().Add(retryFor); retryable(err) && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
		err = get()
	}
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	v := hm.Val()
	if v[0] == nil {
		return nil, nil, dtx.ErrNotFound
	}
	g, err := decodeGlobal(v[0], v[1], v[2])
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	var bs []dtx.Branch
	if dtx.KeepsBranches(g.TransType) {
		bs = make([]dtx.Branch, len(lr.Val()))
		for i, b := range lr.Val() {
			if err := json.Unmarshal([]byte(b), &bs[i]); err != nil {
				return nil, nil, s.wrap(fmt.Errorf("decode a branch of %s: %w", gid, err))
			}
		}
	} else {
		bs = dtx.GenBranches(g)
		for i := range bs {
			bs[i].CreateTime = g.CreateTime
		}
	}
	if u := ur.Val(); len(u) > 0 {
		for i := range bs {
			if st, ok := u[updateKey(bs[i].BranchID, bs[i].Op)]; ok {
				status, fin, _ := strings.Cut(st, "\x00")
				bs[i].Status, bs[i].FinishTime = status, fromNS(fin)
			}
		}
	}
	g.OverlayStatus(bs)
	return g, bs, nil
}

func updateKey(branchID, op string) string { return branchID + "\x00" + op }

// claimScript leases up to limit due transactions: ARGV prefix, now (µs),
// token, lease (ns), lease (µs), limit. It returns their documents. The
// scores it writes are the strings Redis gave or Go made: a Lua number
// would be printed with 14 digits.
var claimScript = redis.NewScript(`
local P = ARGV[1]
local due = P .. 'due'
local ids = redis.call('ZRANGEBYSCORE', due, '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', '0', ARGV[6])
local out = {}
for j = 1, #ids, 2 do
  local gid, score = ids[j], ids[j + 1]
  local gk = P .. 'g:' .. gid
  redis.call('HSET', gk, 'o', ARGV[3], 'l', ARGV[4])
  if tonumber(ARGV[5]) > tonumber(score) then score = ARGV[5] end
  redis.call('ZADD', due, score, gid)
  out[#out + 1] = redis.call('HGET', gk, 'd')
end
return out
`)

// Claim leases due transactions in one script: a concurrent Claim runs
// before or after it, and then no longer finds them due.
func (s *Store) Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*dtx.Global, error) {
	if limit <= 0 {
		return nil, nil
	}
	// Not retried: a claim whose reply was lost leaves its transactions
	// leased to a token nobody drives, until the lease lapses.
	v, err := s.run(ctx, claimScript, false, s.prefix, usFloor(now), token, ns(leaseUntil), usCeil(leaseUntil), strconv.Itoa(limit))
	if err != nil {
		return nil, s.wrap(err)
	}
	docs, _ := v.([]any)
	out := make([]*dtx.Global, 0, len(docs))
	for _, d := range docs {
		g, err := decodeGlobal(d, token, ns(leaseUntil))
		if err != nil {
			return nil, s.wrap(err)
		}
		g.LeaseUntil = leaseUntil
		out = append(out, g)
	}
	return out, nil
}

// listScript pages through the gids after ARGV[2] in order, returning up
// to ARGV[3] transactions of status ARGV[4] and type ARGV[5] ("": any)
// as document, owner, lease triples after two entries: "1" when the end
// was reached, and the last gid looked at. It looks at ARGV[6] gids at
// most, so that a rare filter does not hold the server long.
var listScript = redis.NewScript(`
local P = ARGV[1]
local from = '(' .. ARGV[2]
local want, status, typ, budget = tonumber(ARGV[3]), ARGV[4], ARGV[5], tonumber(ARGV[6])
local out = {'0', ARGV[2]}
local found = 0
while found < want and budget > 0 do
  local n = want - found
  if status ~= '' or typ ~= '' then n = 256 end
  if n > budget then n = budget end
  local ids = redis.call('ZRANGEBYLEX', P .. 'all', from, '+', 'LIMIT', '0', tostring(n))
  if #ids == 0 then out[1] = '1' break end
  for _, gid in ipairs(ids) do
    budget = budget - 1
    out[2] = gid
    local h = redis.call('HMGET', P .. 'g:' .. gid, 's', 't', 'd', 'o', 'l')
    if h[3] and (status == '' or h[1] == status) and (typ == '' or h[2] == typ) then
      out[#out + 1] = h[3]
      out[#out + 1] = h[4]
      out[#out + 1] = h[5]
      found = found + 1
      if found == want then break end
    end
  end
  from = '(' .. out[2]
  if #ids < n and found < want then out[1] = '1' break end
end
return out
`)

// listBudget is how many gids one run of listScript looks at.
const listBudget = 2048

// List pages through transactions in gid order.
func (s *Store) List(ctx context.Context, after string, limit int, status, transType string) ([]*dtx.Global, error) {
	var out []*dtx.Global
	for len(out) < limit {
		v, err := s.run(ctx, listScript, true, s.prefix, after, strconv.Itoa(limit-len(out)), status, transType, strconv.Itoa(listBudget))
		if err != nil {
			return nil, s.wrap(err)
		}
		r, _ := v.([]any)
		if len(r) < 2 {
			return nil, s.wrap(fmt.Errorf("list: unexpected reply %v", v))
		}
		for i := 2; i+2 < len(r); i += 3 {
			g, err := decodeGlobal(r[i], r[i+1], r[i+2])
			if err != nil {
				return nil, s.wrap(err)
			}
			out = append(out, g)
		}
		if r[0] == "1" {
			break
		}
		after, _ = r[1].(string)
	}
	return out, nil
}

// purgeScript removes up to ARGV[3] transactions that finished before
// ARGV[2] (µs), with their branches, and returns how many.
var purgeScript = redis.NewScript(`
local P = ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', P .. 'fin', '-inf', '(' .. ARGV[2], 'LIMIT', '0', ARGV[3])
for _, gid in ipairs(ids) do
  redis.call('DEL', P .. 'g:' .. gid, P .. 'b:' .. gid, P .. 'k:' .. gid, P .. 'u:' .. gid)
  redis.call('ZREM', P .. 'all', gid)
  redis.call('ZREM', P .. 'fin', gid)
  redis.call('ZREM', P .. 'due', gid)
end
return #ids
`)

// Purge removes finished transactions that finished before `before`.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	v, err := s.run(ctx, purgeScript, true, s.prefix, usFloor(before), strconv.Itoa(limit))
	if err != nil {
		return 0, s.wrap(err)
	}
	n, _ := v.(int64)
	return int(n), nil
}

var (
	_ dtx.Store   = (*Store)(nil)
	_ dtx.KVStore = (*Store)(nil)
)
