package apply_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// checkpointOf reads a task's checkpoint from the target.
func checkpointOf(tb testing.TB, task string) sluice.Position {
	tb.Helper()
	db, err := apply.OpenTarget(context.Background(), dstInst.Endpoint(), 1)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	a, err := apply.New(applierConfig(runOpts{task: task}), db)
	if err != nil {
		tb.Fatal(err)
	}
	p, ok, err := a.Checkpoint(context.Background())
	if err != nil || !ok {
		tb.Fatalf("checkpoint of %s: %v %v", task, ok, err)
	}
	return p
}

func samePos(a, b sluice.Position) bool { return a.File == b.File && a.Pos == b.Pos }

func gtidPos(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	var g string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&g); err != nil {
		tb.Fatal(err)
	}
	return g
}

func count(tb testing.TB, db *sql.DB, q string) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestMissingRow deletes rows on the target behind the task's back and
// then changes them on the source, through each way the applier writes an
// UPDATE or DELETE: one statement per row (a table with a second unique
// key), merged DELETE ... IN and UPDATE ... JOIN (compacted groups), a
// keyless table (LIMIT 1), relaxed commit order and a streamed large
// transaction. By default the task stops with ErrMissingRow naming the
// table, the key and the source transaction; nothing of that transaction
// is committed and the checkpoint stays before it. With on-missing-row:
// skip the same stream applies, the rows are counted, and the tables end
// equal (the source deletes the rows the target lost).
func TestMissingRow(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	cases := []struct {
		name    string
		table   string // created in schema mr_<name>
		rows    string // initial INSERT values
		lose    string // the target's rows deleted behind the task's back
		changes []string
		key     string // what the error must name
		missing uint64 // rows counted with skip
		kept    bool   // the source keeps the row: the tables differ by it after skip
		opts    runOpts
	}{
		{name: "single", table: "(id INT PRIMARY KEY, u INT, v INT, UNIQUE KEY (u))", rows: "(1,1,1),(2,2,2),(3,3,3)", lose: "id=2",
			changes: []string{"UPDATE %s SET v=20 WHERE id=2", "DELETE FROM %s WHERE id=2"}, key: "`id`=2", missing: 2},
		{name: "deletein", table: "(id INT PRIMARY KEY, v INT)", rows: "(1,1),(2,2),(3,3),(4,4)", lose: "id=3",
			changes: []string{"DELETE FROM %s WHERE id IN (1,2,3)"}, key: "`id`=3", missing: 1},
		{name: "updatejoin", table: "(id INT PRIMARY KEY, v INT)", rows: "(1,1),(2,2),(3,3),(4,4)", lose: "id=2",
			changes: []string{"UPDATE %s SET v=v+10 WHERE id<=3"}, key: "`id`=2", missing: 1, kept: true},
		{name: "keyless", table: "(a INT, b VARCHAR(10))", rows: "(1,'x'),(2,'y'),(2,'y'),(3,'z')", lose: "a=1",
			changes: []string{"UPDATE %s SET b='w' WHERE a=1", "DELETE FROM %s WHERE a=1"}, key: "`a`=1", missing: 2},
		{name: "relaxed", table: "(id INT PRIMARY KEY, v INT)", rows: "(1,1),(2,2),(3,3),(4,4)", lose: "id=4",
			changes: []string{"UPDATE %s SET v=0 WHERE id=4", "DELETE FROM %s WHERE id>=3"}, key: "`id`=4", missing: 1, opts: runOpts{relaxed: true}},
		{name: "large", table: "(id INT PRIMARY KEY, v INT, pad VARCHAR(2000))", rows: "(1,1,''),(2,2,''),(3,3,'')", lose: "id=3",
			changes: []string{"UPDATE %s SET pad=REPEAT('p',2000) WHERE id<=2", "UPDATE %s SET v=30 WHERE id=3", "DELETE FROM %s WHERE id=3"},
			key:     "`id`=3", missing: 2, opts: runOpts{large: 4096}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schemaName := "mr_" + c.name
			tbl := schemaName + ".t"
			task := "missing_" + c.name
			seed(t, task, src)
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+schemaName, "CREATE TABLE "+tbl+" "+c.table,
				"CREATE TABLE "+schemaName+".side (id INT PRIMARY KEY)", "INSERT INTO "+tbl+" VALUES "+c.rows)
			o := c.opts
			o.task, o.until = task, sourcePos(t, src)
			if _, err := replicate(context.Background(), srcInst, o); err != nil {
				t.Fatal(err)
			}
			sameTables(t, src, dst, tbl)
			synced := o.until
			sandboxtest.MustExec(t, dst, "DELETE FROM "+tbl+" WHERE "+c.lose)
			// One source transaction: a row of another table first, then
			// the changes of the lost row.
			tx, err := src.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("INSERT INTO " + schemaName + ".side VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			for _, q := range c.changes {
				if _, err := tx.Exec(fmt.Sprintf(q, tbl)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			gtid := gtidPos(t, src)
			o.until = sourcePos(t, src)

			_, err = replicate(context.Background(), srcInst, o)
			if !errors.Is(err, apply.ErrMissingRow) {
				t.Fatalf("got %v, want ErrMissingRow", err)
			}
			msg := err.Error()
			t.Logf("error shown to the user: %s", msg)
			for _, want := range []string{"`" + schemaName + "`.`t`", c.key, gtid, "(fix: "} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			if n := count(t, dst, "SELECT COUNT(*) FROM "+schemaName+".side"); n != 0 {
				t.Errorf("the failed transaction's other row is on the target (%d rows): it was committed", n)
			}
			if p := checkpointOf(t, task); !samePos(p, synced) {
				t.Fatalf("checkpoint moved to %v after the failure, want %v", p, synced)
			}
			// A restart stops again at the same place: the error is not transient.
			if _, err := replicate(context.Background(), srcInst, o); !errors.Is(err, apply.ErrMissingRow) {
				t.Fatalf("restart: got %v, want ErrMissingRow again", err)
			}

			o.missing = apply.MissingRowSkip
			st, err := replicate(context.Background(), srcInst, o)
			if err != nil {
				t.Fatalf("with on-missing-row skip: %v", err)
			}
			if st.MissingRows != c.missing {
				t.Errorf("MissingRows %d, want %d", st.MissingRows, c.missing)
			}
			if c.kept {
				sameTables(t, src, dst, tbl+" WHERE NOT ("+c.lose+")", schemaName+".side")
			} else {
				sameTables(t, src, dst, tbl, schemaName+".side")
			}
			if p := checkpointOf(t, task); !samePos(p, o.until) {
				t.Fatalf("checkpoint %v after skipping, want %v", p, o.until)
			}
		})
	}
}

// TestNoFalseMissingRow: an UPDATE that sets a row to the values the
// target holds already (changed rows 0, found rows 1) is no missing row.
// The target row is changed behind the task's back to the source's new
// values, so the replicated UPDATE changes nothing there.
func TestNoFalseMissingRow(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "nofalse"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE nf", "CREATE TABLE nf.t (id INT PRIMARY KEY, v INT, u INT, UNIQUE KEY (u))",
		"CREATE TABLE nf.c (id INT PRIMARY KEY, v INT)", "INSERT INTO nf.t VALUES (1,1,1),(2,2,2)", "INSERT INTO nf.c VALUES (1,1),(2,2),(3,3)")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, dst, "UPDATE nf.t SET v=10 WHERE id=1", "UPDATE nf.c SET v=v+10")
	sandboxtest.MustExec(t, src, "UPDATE nf.t SET v=10 WHERE id=1", "UPDATE nf.c SET v=v+10")
	until = sourcePos(t, src)
	st, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until})
	if err != nil {
		t.Fatal(err)
	}
	if st.MissingRows != 0 {
		t.Fatalf("MissingRows %d", st.MissingRows)
	}
	sameTables(t, src, dst, "nf.t", "nf.c")
}

// TestStrictSessionAcceptsSourceValues: the strict target session must
// still take every value a source may hold, including what a non-strict
// source stores: zero dates and zero parts in dates, the limits of each
// type, trailing spaces. (Not an ENUM's empty error value, index 0, that
// a non-strict source stores for an unknown name: strict mode refuses it
// and the task stops with "Data truncated"; see the report of issue 13.)
func TestStrictSessionAcceptsSourceValues(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "strictvals"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE sv",
		`CREATE TABLE sv.t (id INT PRIMARY KEY, d DATE, dt DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
			bu BIGINT UNSIGNED, bs BIGINT, ti TINYINT, dec1 DECIMAL(65,30), db DOUBLE, fl FLOAT, e ENUM('a','b'), st SET('x','y'),
			vc VARCHAR(5), ch CHAR(5), bin BINARY(4), vb VARBINARY(4), bt BIT(64))`)
	conn, err := src.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"SET SESSION sql_mode=''",
		`INSERT INTO sv.t VALUES
			(1,'0000-00-00','0000-00-00 00:00:00','0000-00-00 00:00:00','00:00:00',0000, 0,0,0,0,0,0,'a', '',  '','', '','', 0),
			(2,'2020-00-15','2020-02-00 10:00:00',NULL,'838:59:59.000000',2155, 18446744073709551615,9223372036854775807,127,
			  99999999999999999999999999999999999.999999999999999999999999999999,1.7976931348623157e308,3.4028235e38,'b','x,y','abcde','abcde',X'FFFFFFFF',X'00', b'1111111111111111111111111111111111111111111111111111111111111111'),
			(3,'9999-12-31','9999-12-31 23:59:59.999999','2038-01-19 03:14:07.999999','-838:59:59.000000',1901, 1,-9223372036854775808,-128,
			  -99999999999999999999999999999999999.999999999999999999999999999999,-2.2250738585072014e-308,-1.17549435e-38,'a','x','a   ','a',X'00',X'',b'0'),
			(4,'1000-01-01','1000-01-01 00:00:00.000001','1970-01-01 00:00:01',NULL,NULL,NULL,NULL,NULL,NULL,-0,NULL,NULL,NULL,'',NULL,NULL,NULL,NULL)`,
		"UPDATE sv.t SET d='0000-00-00', dt='0000-00-00 00:00:00', e='b' WHERE id=4",
		"UPDATE sv.t SET d='2021-01-01' WHERE d='0000-00-00' AND id=1",
		"DELETE FROM sv.t WHERE id=2",
		"INSERT INTO sv.t (id, d, e) SELECT 2, d, e FROM sv.t WHERE id=1",
	} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "sv.t")
	var a, b string
	if err := src.QueryRow("CHECKSUM TABLE sv.t EXTENDED").Scan(new(string), &a); err != nil {
		t.Fatal(err)
	}
	if err := dst.QueryRow("CHECKSUM TABLE sv.t EXTENDED").Scan(new(string), &b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("CHECKSUM TABLE: source %s, target %s", a, b)
	}
}

// TestTargetWarningStops: a target column narrower than the source's
// (changed behind the task's back) makes the target round a DECIMAL with
// only a note, and cut a VARCHAR with an error in strict mode. Both stop
// the task with the table, the source transaction and the target's text;
// nothing of the transaction is committed.
func TestTargetWarningStops(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	for _, c := range []struct {
		name, alter, change, want string
		sentinel                  error
	}{
		{"note", "MODIFY d DECIMAL(10,1)", "INSERT INTO %s VALUES (2, 1.25, 'x')", "1265", apply.ErrTargetWarning},
		{"noteupdate", "MODIFY d DECIMAL(10,1)", "UPDATE %s SET d=3.33 WHERE id=1", "1265", apply.ErrTargetWarning},
		{"strict", "MODIFY s VARCHAR(2)", "INSERT INTO %s VALUES (2, 1, 'long')", "Data too long", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			schemaName := "tw_" + c.name
			tbl := schemaName + ".t"
			task := "warn_" + c.name
			seed(t, task, src)
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+schemaName, "CREATE TABLE "+tbl+" (id INT PRIMARY KEY, d DECIMAL(10,2), s VARCHAR(10))",
				"CREATE TABLE "+schemaName+".side (id INT PRIMARY KEY)", "INSERT INTO "+tbl+" VALUES (1, 1, 'a')")
			synced := sourcePos(t, src)
			if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: synced}); err != nil {
				t.Fatal(err)
			}
			sandboxtest.MustExec(t, dst, "ALTER TABLE "+tbl+" "+c.alter)
			tx, err := src.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"INSERT INTO " + schemaName + ".side VALUES (1)", fmt.Sprintf(c.change, tbl)} {
				if _, err := tx.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			gtid := gtidPos(t, src)
			until := sourcePos(t, src)
			_, err = replicate(context.Background(), srcInst, runOpts{task: task, until: until})
			if err == nil {
				t.Fatal("the target changed a value and the task went on")
			}
			if c.sentinel != nil && !errors.Is(err, c.sentinel) {
				t.Fatalf("got %v, want %v", err, c.sentinel)
			}
			msg := err.Error()
			t.Logf("error shown to the user: %s", msg)
			for _, want := range []string{c.want, gtid} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if c.sentinel != nil && !strings.Contains(msg, "`"+schemaName+"`.`t`") {
				t.Errorf("error %q does not name the table", msg)
			}
			if n := count(t, dst, "SELECT COUNT(*) FROM "+schemaName+".side"); n != 0 {
				t.Errorf("the failed transaction's other row was committed")
			}
			if p := checkpointOf(t, task); !samePos(p, synced) {
				t.Fatalf("checkpoint %v, want %v", p, synced)
			}
		})
	}
}
