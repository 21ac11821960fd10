package sandboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-db/sluice/sandbox"
)

// StartTiDB starts a TiDB sandbox (one tidb-server in unistore mode) for
// one test on free loopback ports, and stops it when the test ends. The
// first use on a machine builds tidb-server into its cache (about 11
// minutes, 2.4 GB; sandbox.TiDBBinary); the test is skipped only when the
// binary is missing and building is turned off (SLUICE_TIDB_BUILD=0).
func StartTiDB(tb testing.TB) *sandbox.TiDB {
	tb.Helper()
	reapTiDBOrphans()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if _, err := sandbox.TiDBBinary(ctx, sandbox.TiDBCacheDir(), testWriter{tb}); err != nil {
		if errors.Is(err, sandbox.ErrTiDBNotBuilt) {
			tb.Skipf("no TiDB: %v", err)
		}
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sbt")
	if err != nil {
		tb.Fatal(err)
	}
	if err := markOwner(dir); err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := sandbox.DefaultTiDBConfig()
		c.Dir, c.Name, c.DieWithParent = dir, "tidb", true
		if c.Port, err = sandbox.FreePort(); err != nil {
			tb.Fatal(err)
		}
		t, err := sandbox.TiDBUp(ctx, c)
		if err == nil {
			tb.Cleanup(func() {
				sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
				defer scancel()
				_ = t.Stop(sctx, 30*time.Second)
				_ = os.RemoveAll(dir)
			})
			return t
		}
		lastErr = err
		if t, lerr := sandbox.LoadTiDB(dir, "tidb"); lerr == nil {
			_ = t.Stop(ctx, time.Second)
		}
		_ = os.RemoveAll(filepath.Join(dir, "tidb"))
	}
	_ = os.RemoveAll(dir)
	tb.Fatalf("sandboxtest: start TiDB: %v", lastErr)
	return nil
}

// MustOpenTiDB opens db on t as root, with multi-statements.
func MustOpenTiDB(tb testing.TB, t *sandbox.TiDB, db string) *sql.DB {
	tb.Helper()
	d, err := sql.Open("mysql", t.DSN(db)+"?multiStatements=true&interpolateParams=true")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// reapTiDBOrphans stops and removes the TiDB sandboxes of test processes
// that died without cleaning up.
func reapTiDBOrphans() {
	for _, dir := range deadOwnerDirs("sbt*") {
		if t, err := sandbox.LoadTiDB(dir, "tidb"); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = t.Stop(ctx, 5*time.Second)
			cancel()
		}
		_ = os.RemoveAll(dir)
	}
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(fmt.Sprint(string(p)))
	return len(p), nil
}
