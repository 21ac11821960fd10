package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCheckPreparedXA: while the source holds a prepared XA transaction,
// sluice check --mode all fails naming its XID, and migrate --mode all
// refuses before it copies a row (the snapshot's XA RECOVER, under its
// lock); a copy alone is not refused. Before the fix both went ahead, and
// replication stopped later at the transaction's XA COMMIT, whose rows
// were in neither the copy nor the stream.
func TestCheckPreparedXA(t *testing.T) {
	inst := sandboxtest.Start(t, "xachk")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE xsrc", "CREATE TABLE xsrc.t (id INT PRIMARY KEY, v INT)", "INSERT INTO xsrc.t VALUES (1, 1)",
		"CREATE DATABASE xdst")
	ctx := context.Background()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, q := range []string{"XA START 'app1'", "INSERT INTO xsrc.t VALUES (2, 2)", "XA END 'app1'", "XA PREPARE 'app1'"} {
		if _, err := a.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "xsrc", "vdst", "xdst", "name: vt", "name: xachk").Replace(
		verifyTaskYAML(ep, ep, "xsrc.*", "dir: "+t.TempDir()+"\n")))
	out, _, err := runCLI(t, "check", "--config", cfg)
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "prepared XA") {
			line = l
		}
	}
	if !errors.Is(err, ErrChecksFailed) || !strings.HasPrefix(line, "fail  prepared XA") || !strings.Contains(line, "'app1'") || !strings.Contains(err.Error(), "XA ROLLBACK") {
		t.Fatalf("check with a prepared XA transaction: %v\n%s", err, out)
	}
	if out, _, _ := runCLI(t, "check", "--config", cfg, "--mode", "full"); strings.Contains(out, "prepared XA") {
		t.Fatalf("check --mode full names the prepared XA, which a copy alone does not mind:\n%s", out)
	}
	_, _, err = runCLI(t, "migrate", "--config", cfg, "--mode", "all")
	if !errors.Is(err, dump.ErrPreparedXA) || !strings.Contains(err.Error(), "'app1'") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("migrate --mode all with a prepared XA transaction: %v", err)
	}
	t.Logf("refusal: %v", err)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'xdst'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused run made %d target tables (%v)", n, err)
	}
	if _, err := a.ExecContext(ctx, "XA COMMIT 'app1'"); err != nil {
		t.Fatal(err)
	}
	if out, _, err = runCLI(t, "check", "--config", cfg); !strings.Contains(out, "pass  prepared XA") {
		t.Fatalf("check without a prepared XA transaction: %v\n%s", err, out)
	}
}
