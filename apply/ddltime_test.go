package apply_test

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDDLRunsAtSourceTime: a DDL that takes values from the clock stores
// the source's values on the target, as on a replica (the Query event's
// time, microseconds included). Difftest seed 2111: ALTER TABLE ... ADD
// PRIMARY KEY over a NULL TIMESTAMP column filled it with the apply time on
// the target, so the next UPDATE by that key found no row. ADD COLUMN ...
// DEFAULT CURRENT_TIMESTAMP(6) fills existing rows the same way. The
// applier runs well after the source statements (it starts after them),
// so without the source's time every value differs in its microseconds.
func TestDDLRunsAtSourceTime(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "ddltime", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE ddltime",
		"CREATE TABLE ddltime.t (ts TIMESTAMP(6) NULL, v INT NOT NULL, n INT)",
		"INSERT INTO ddltime.t (ts, v, n) VALUES (NULL, 1, 0), (NULL, 2, 0), ('2001-02-03 04:05:06.7', 3, 0)",
		"ALTER TABLE ddltime.t ADD PRIMARY KEY (ts, v)",
		"ALTER TABLE ddltime.t ADD COLUMN c TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
		"UPDATE ddltime.t SET n = n + 1",
		"DELETE FROM ddltime.t WHERE v = 2")
	var nulls int
	if err := src.QueryRow("SELECT COUNT(*) FROM ddltime.t WHERE ts > '2020-01-01'").Scan(&nulls); err != nil || nulls != 1 {
		t.Fatalf("the source's ALTER filled %d NULL TIMESTAMPs from its clock (%v), want 1: the test tests nothing", nulls, err)
	}
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "ddltime", until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "ddltime.t")
}
