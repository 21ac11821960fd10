package serve_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestShowBinlogEventsMatchesTheSource: SHOW BINLOG EVENTS and SHOW
// BINARY LOGS on the service print, row for row, what the source prints
// for the same files (DDL with and without a default database, a MyISAM
// COMMIT, a second GTID domain, an XA transaction, a rotation), and FROM
// and LIMIT pick the same rows.
func TestShowBinlogEventsMatchesTheSource(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	first := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), sluice.Position{File: first.File, Pos: 4})
	addr, pw := startServe(t, l)
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(20))",
		"INSERT INTO d.t VALUES (1,'a'),(2,'b')",
		"UPDATE d.t SET v='c'",
		"FLUSH BINARY LOGS",
	)
	one := sandboxtest.MustOpen(t, inst, "d")
	one.SetMaxOpenConns(1) // the session variables below stay on one connection
	sandboxtest.MustExec(t, one,
		"CREATE TABLE m (a int) ENGINE=MyISAM",
		"INSERT INTO m VALUES (1)",
		"SET SESSION gtid_domain_id=2",
		"INSERT INTO t VALUES (9,'z')",
		"SET SESSION gtid_domain_id=0",
		"XA START 'xa1'", "INSERT INTO t VALUES (10,'xa')", "XA END 'xa1'", "XA PREPARE 'xa1'", "XA COMMIT 'xa1'",
		"DELETE FROM t WHERE id=1",
	)
	end := masterStatus(t, db)
	wait(end)
	sdb, err := sql.Open("mysql", "repl:"+pw+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	rows := func(db *sql.DB, q string) ([]string, error) {
		r, err := db.Query(q)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		cols, _ := r.Columns()
		var out []string
		for r.Next() {
			v := make([]sql.NullString, len(cols))
			p := make([]any, len(v))
			for i := range v {
				p[i] = &v[i]
			}
			if err := r.Scan(p...); err != nil {
				return nil, err
			}
			s := make([]string, len(v))
			for i := range v {
				s[i] = v[i].String
			}
			out = append(out, strings.Join(s, " | "))
		}
		return out, r.Err()
	}
	same := func(q string) []string {
		t.Helper()
		want, err := rows(db, q)
		if err != nil {
			t.Fatalf("source: %s: %v", q, err)
		}
		got, err := rows(sdb, q)
		if err != nil {
			t.Fatalf("service: %s: %v", q, err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s\nsource:\n%s\nservice:\n%s", q, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
		return got
	}
	logs := same("SHOW BINARY LOGS")
	if len(logs) < 2 {
		t.Fatalf("SHOW BINARY LOGS: %v", logs)
	}
	var kinds []string
	for _, f := range []string{first.File, end.File} {
		for _, r := range same(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s'", f)) {
			kinds = append(kinds, strings.Split(r, " | ")[2])
		}
	}
	for _, k := range []string{"Format_desc", "Gtid_list", "Binlog_checkpoint", "Gtid", "Query", "Table_map", "Write_rows_v1", "Update_rows_v1", "Delete_rows_v1", "Xid", "Rotate"} {
		if !strings.Contains(strings.Join(kinds, ","), k) {
			t.Errorf("no %s event compared", k)
		}
	}
	same("SHOW BINLOG EVENTS")
	ev := same(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' LIMIT 4", end.File))
	from := strings.Split(ev[3], " | ")[1]
	same(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %s LIMIT 2, 3", end.File, from))
	same(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %s", end.File, from))
	// A position inside an event: MariaDB refuses it, and so does the service, naming the fix.
	if _, err := rows(sdb, fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM 5", end.File)); err == nil || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("FROM inside an event: %v", err)
	}
	if _, err := rows(sdb, "SHOW BINLOG EVENTS IN 'nosuch.000001'"); err == nil || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("an unknown file: %v", err)
	}
}
