package difftest

import (
	"context"
	"testing"
)

// TestOracleRepoint: a native replica that a previous seed stopped is
// re-pointed at the source before the next seed, which is then compared
// with it like any other (a stopped replica must not fail every later
// seed, nor let them pass uncompared).
func TestOracleRepoint(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB sandboxes")
	}
	ctx := context.Background()
	if _, err := env.RepDB.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	if running, _, err := replicaState(ctx, env.RepDB); err != nil || running {
		t.Fatalf("replica still running after STOP SLAVE SQL_THREAD (%v)", err)
	}
	res := runScript(t, Script{Name: "oraclerepoint",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.t VALUES (1, 1)"},
		After:  []string{"INSERT INTO {s}.t VALUES (2, 2)", "UPDATE {s}.t SET v = 5 WHERE id = 1"}})
	if !res.Pass || res.Oracle != "ok" || len(res.OracleDiffs) > 0 {
		t.Fatalf("pass=%v oracle=%s problems=%v oracle diffs=%v", res.Pass, res.Oracle, res.Problems, res.OracleDiffs)
	}
	if running, lastErr, err := replicaState(ctx, env.RepDB); err != nil || !running {
		t.Fatalf("replica not running after the seed: %v %s", err, lastErr)
	}
}
