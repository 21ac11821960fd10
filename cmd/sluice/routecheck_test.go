package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// targetState lists every schema and table on db but the system schemas,
// and the load_task rows, so that a test can see a refused run left
// nothing behind.
func targetState(t *testing.T, db *sql.DB) string {
	t.Helper()
	var tables string
	if err := db.QueryRow("SELECT COALESCE(GROUP_CONCAT(CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) ORDER BY TABLE_SCHEMA, TABLE_NAME), '') FROM information_schema.TABLES " +
		"WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	var schemas string
	if err := db.QueryRow("SELECT GROUP_CONCAT(SCHEMA_NAME ORDER BY SCHEMA_NAME) FROM information_schema.SCHEMATA").Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	var rows int
	_ = db.QueryRow("SELECT COUNT(*) FROM sluice_meta.load_task").Scan(&rows)
	return fmt.Sprintf("schemas %s; tables %s; load_task rows %d", schemas, tables, rows)
}

// TestHalfDoneRefusals: a route to a 65-character name and a route that
// merges two source tables into one created tables and left unfinished
// load_task rows before failing, and a bad or busy metrics-addr was
// reported after the whole copy. Each is refused before anything exists
// on the target.
func TestHalfDoneRefusals(t *testing.T) {
	src := sandboxtest.Start(t, "hsrc")
	dst := sandboxtest.Start(t, "hdst")
	sdb := sandboxtest.MustOpen(t, src, "")
	ddb := sandboxtest.MustOpen(t, dst, "")
	sandboxtest.MustExec(t, sdb, "CREATE DATABASE vsrc", "CREATE TABLE vsrc.t1 (id INT PRIMARY KEY)", "CREATE TABLE vsrc.t2 (id INT PRIMARY KEY)",
		"INSERT INTO vsrc.t1 VALUES (1), (2)", "INSERT INTO vsrc.t2 VALUES (3)")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	long := strings.Repeat("x", 65)
	cases := []struct {
		name, mode, extra, want string
	}{
		{"65-character schema", "full", "routes:\n  - {schema: vsrc, target-schema: " + long + "}\n", "65 characters"},
		{"65-character table", "full", "routes:\n  - {schema: vsrc, table: t1, target-schema: vdst, target-table: " + long + "}\n", "65 characters"},
		{"merging route", "full", "routes:\n  - {schema: vsrc, table: \"t*\", target-schema: vdst, target-table: merged}\n", "sluice does not merge tables"},
		{"busy metrics-addr", "all", "incremental: {metrics-addr: \"" + busy.Addr().String() + "\"}\n", "metrics-addr"},
		{"bad metrics-addr", "full", "incremental: {metrics-addr: \"nohost:notaport\"}\n", "metrics-addr"},
	}
	before := targetState(t, ddb)
	for _, c := range cases {
		body := verifyTaskYAML(src.Endpoint(), dst.Endpoint(), "vsrc.*", "dir: "+t.TempDir()+"\n"+c.extra)
		if strings.HasPrefix(c.extra, "routes:") {
			// Replace the helper's route with the case's.
			body = strings.Replace(body, "routes:\n  - {schema: vsrc, target-schema: vdst}\n", "", 1)
		}
		cfg := verifyTask(t, body)
		_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", c.mode)
		if err == nil || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a configuration error naming %q", c.name, err, c.want)
		}
		if after := targetState(t, ddb); after != before {
			t.Errorf("%s: the refused run left something on the target:\n before %s\n after  %s", c.name, before, after)
		}
	}
}
