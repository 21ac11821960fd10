package sandbox_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestTiDBUpDown starts a TiDB sandbox (building tidb-server the first time
// on the machine), checks it answers as TiDB v8.4 and keeps its data across
// a clean stop and start, and checks up's refusals and the CLI's
// status/down.
func TestTiDBUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts TiDB")
	}
	tdb := sandboxtest.StartTiDB(t)
	ctx := context.Background()
	db := sandboxtest.MustOpenTiDB(t, tdb, "")
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil || !strings.Contains(v, "-TiDB-v8.4") {
		t.Fatalf("VERSION() = %q, %v; want TiDB v8.4", v, err)
	}
	sandboxtest.MustExec(t, db, "CREATE DATABASE keep", "CREATE TABLE keep.t (id INT PRIMARY KEY)", "INSERT INTO keep.t VALUES (7)")
	dir := filepath.Dir(tdb.Home)
	c := sandbox.DefaultTiDBConfig()
	c.Dir, c.Name, c.Port = dir, "tidb", tdb.Port
	if _, err := sandbox.TiDBUp(ctx, c); err != nil {
		t.Fatalf("up on a running sandbox: %v", err)
	}
	c.Port++
	if _, err := sandbox.TiDBUp(ctx, c); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("up on another port: %v, want a config error", err)
	}
	bin := sandboxtest.BuildSluice(t)
	out, err := exec.Command(bin, "sandbox", "tidb", "status", "--dir", dir, "--name", "tidb").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "up:") {
		t.Fatalf("sandbox tidb status: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "sandbox", "tidb", "down", "--dir", dir, "--name", "tidb").CombinedOutput(); err != nil {
		t.Fatalf("sandbox tidb down: %v: %s", err, out)
	}
	if _, ok := tdb.Running(); ok {
		t.Fatal("server still running after down")
	}
	// up again through the CLI: the binary is cached, the data kept.
	start := time.Now()
	out, err = exec.Command(bin, "sandbox", "tidb", "up", "--dir", dir, "--name", "tidb", "--port", strconv.Itoa(tdb.Port)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "root@tcp(") {
		t.Fatalf("sandbox tidb up again: %v: %s", err, out)
	}
	t.Logf("second up took %s", time.Since(start).Round(time.Millisecond))
	var n int
	if err := db.QueryRow("SELECT id FROM keep.t").Scan(&n); err != nil || n != 7 {
		t.Fatalf("row after restart: %d, %v", n, err)
	}
	if err := sandbox.TiDBDown(ctx, dir, "tidb", true, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.LoadTiDB(dir, "tidb"); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("record after down --purge: %v", err)
	}
}
