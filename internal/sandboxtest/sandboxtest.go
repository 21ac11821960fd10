// Package sandboxtest starts real MariaDB sandboxes for tests. Each instance
// gets a short private state directory (unix socket paths are limited to 107
// bytes) and a free loopback port, and is stopped and purged on cleanup.
package sandboxtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/sandbox"
)

// TLS, among New's or Start's options, starts the sandbox with TLS (a CA
// and server certificate for 127.0.0.1: Instance.CAFile).
const TLS = "sluice:tls"

// New starts an instance named name and returns it with a stop function.
// Use it from TestMain to share one server across a package's tests.
func New(name string, opts ...string) (*sandbox.Instance, func(), error) {
	if Short() {
		return nil, nil, ErrShort
	}
	reapOrphans()
	tls := false
	var rest []string
	for _, o := range opts {
		if o == TLS {
			tls = true
			continue
		}
		rest = append(rest, o)
	}
	opts = rest
	dir, err := os.MkdirTemp("", "sbx")
	if err != nil {
		return nil, nil, err
	}
	if err := markOwner(dir); err != nil {
		return nil, nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := sandbox.FreePort()
		if err != nil {
			return nil, nil, err
		}
		c := sandbox.DefaultConfig()
		c.Dir, c.Name, c.Port, c.BufferPool, c.Options, c.TLS = dir, name, port, "128M", opts, tls
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		inst, err := sandbox.Up(ctx, c)
		cancel()
		if err == nil {
			stop := func() {
				_ = inst.Stop(context.Background(), time.Minute)
				_ = os.RemoveAll(dir)
			}
			return inst, stop, nil
		}
		lastErr = err
		_ = os.RemoveAll(dir + "/" + name)
	}
	_ = os.RemoveAll(dir)
	return nil, nil, fmt.Errorf("sandboxtest: start %s: %w", name, lastErr)
}

// Start starts an instance for one test and stops it when the test ends.
func Start(tb testing.TB, name string, opts ...string) *sandbox.Instance {
	tb.Helper()
	SkipShort(tb)
	inst, stop, err := New(name, opts...)
	if err != nil {
		tb.Fatalf("%v (is mariadb-server installed? run 'make deps')", err)
	}
	tb.Cleanup(stop)
	return inst
}

// Up starts a stopped instance again on its own port and data, with the
// settings New gave it, as a restart after a stop or a crash would.
func Up(tb testing.TB, inst *sandbox.Instance) {
	tb.Helper()
	SkipShort(tb)
	c := sandbox.DefaultConfig()
	c.Dir, c.Name, c.Port, c.BufferPool = filepath.Dir(inst.Home), inst.Name, inst.Port, "128M"
	if _, err := sandbox.Up(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
}

// MustOpen opens a root connection pool to inst's database db.
func MustOpen(tb testing.TB, inst *sandbox.Instance, db string) *sql.DB {
	tb.Helper()
	SkipShort(tb)
	cfg, err := mysql.ParseDSN(inst.DSN(db) + "?time_zone=%27%2B00%3A00%27&interpolateParams=true&tls=preferred")
	if err == nil {
		// tls=preferred: the race detector caught the fallback's race
		// once verify opened two connections at once.
		err = dbconn.CopyPerConnection(cfg)
	}
	var c driver.Connector
	if err == nil {
		c, err = mysql.NewConnector(cfg)
	}
	if err != nil {
		tb.Fatal(err)
	}
	conn := sql.OpenDB(c)
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// MustExec runs each statement on db, failing the test on error.
func MustExec(tb testing.TB, db *sql.DB, stmts ...string) {
	tb.Helper()
	for _, s := range stmts {
		if strings.TrimSpace(s) == "" {
			continue
		}
		if _, err := db.Exec(s); err != nil {
			tb.Fatalf("exec %q: %v", s, err)
		}
	}
}

// Seed is the seed of a randomized test: SLUICE_TEST_SEED when set (to
// rerun a failure), else a new one. It is logged, so a failure shows it.
func Seed(tb testing.TB) int64 {
	tb.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_TEST_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("SLUICE_TEST_SEED: %v", err)
		}
		seed = v
	}
	tb.Logf("seed %d (rerun with SLUICE_TEST_SEED=%d)", seed, seed)
	return seed
}
