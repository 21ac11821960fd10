package decode

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// modeEvent is a Query event whose status variables carry sql_mode.
func modeEvent(schema, q string, mode uint64) *replication.BinlogEvent {
	vars := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint64(vars[1:], mode)
	return &replication.BinlogEvent{Header: &replication.EventHeader{Timestamp: 1},
		Event: &replication.QueryEvent{Schema: []byte(schema), Query: []byte(q), StatusVars: vars}}
}

// TestDDLSourceText: the target gets the source's own DDL text (issue 29,
// N8, N9): a CHECK constraint is not rendered with MySQL's ENFORCED, ALTER
// IGNORE keeps IGNORE, MariaDB-only clauses and string escapes stay as
// written. Under a route only the table names change, also where a column
// has the table's name. Before the fix every statement was rendered from
// the TiDB parse (`CHECK (...) ENFORCED`, IGNORE lost).
func TestDDLSourceText(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Selected = func(r sluice.TableRef) bool { return r.Schema == "db" || r.Schema == "rt" }
	cfg.SchemaSelected = func(s string) bool { return s == "db" || s == "rt" }
	cfg.Route = func(r sluice.TableRef) sluice.TableRef {
		if r.Schema == "rt" {
			return sluice.TableRef{Schema: "merged", Name: r.Name + "_x"}
		}
		return r
	}
	cfg.RouteSchema = func(s string) string {
		if s == "rt" {
			return "merged"
		}
		return s
	}
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const noBackslash, ansiQuotes = 1 << 20, 1 << 2
	cases := []struct {
		schema, q string
		mode      uint64
		want      string // "": q itself
	}{
		{"db", "CREATE TABLE c (a INT, CONSTRAINT pos CHECK (a > 0), CHECK (a < 100))", 0, ""},
		{"db", "ALTER TABLE c ADD CONSTRAINT small CHECK (a < 50)", 0, ""},
		{"db", "ALTER IGNORE TABLE c ADD UNIQUE KEY ua (a)", 0, ""},
		{"db", "CREATE TABLE e (s VARCHAR(5) DEFAULT 'a\\nb') ENGINE=InnoDB /*!100500 PAGE_CHECKSUM=1 */", noBackslash, ""},
		{"db", `CREATE TABLE "q" ("a" INT, "b" VARCHAR(3) DEFAULT 'x')`, ansiQuotes, ""},
		{"db", "CREATE OR REPLACE TABLE c2 (id INT PRIMARY KEY) ENGINE=Aria", 0, ""},
		{"", "CREATE TABLE db.f (id INT PRIMARY KEY)", 0, ""},
		// Routed: the names, and only they, change.
		{"rt", "CREATE TABLE t (t INT PRIMARY KEY, CHECK (t > 0))", 0, "CREATE TABLE `merged`.`t_x` (t INT PRIMARY KEY, CHECK (t > 0))"},
		{"rt", "ALTER IGNORE TABLE t ADD UNIQUE (t), RENAME COLUMN t TO u", 0, "ALTER IGNORE TABLE `merged`.`t_x` ADD UNIQUE (t), RENAME COLUMN t TO u"},
		{"rt", "CREATE TABLE rt.s LIKE t", 0, "CREATE TABLE `merged`.`s_x` LIKE `merged`.`t_x`"},
		{"rt", "CREATE INDEX i ON `t` (u)", 0, "CREATE INDEX i ON `merged`.`t_x` (u)"},
		{"rt", "DROP INDEX i ON t", 0, "DROP INDEX i ON `merged`.`t_x`"},
		{"rt", "RENAME TABLE t TO t2, s TO rt.s2", 0, "RENAME TABLE `merged`.`t_x` TO `merged`.`t2_x`, `merged`.`s_x` TO `merged`.`s2_x`"},
		{"rt", "ALTER TABLE t2 ADD COLUMN v INT, RENAME TO t3", 0, "ALTER TABLE `merged`.`t2_x` ADD COLUMN v INT, RENAME TO `merged`.`t3_x`"},
		{"rt", "TRUNCATE TABLE t3", 0, "TRUNCATE TABLE `merged`.`t3_x`"},
		{"rt", "CREATE TABLE n (s VARCHAR(5) DEFAULT 'a\\nb')", noBackslash, "CREATE TABLE `merged`.`n_x` (s VARCHAR(5) DEFAULT 'a\\nb')"},
		{"rt", "/* t */ CREATE TABLE /*!32312 IF NOT EXISTS*/ w (t INT COMMENT 't') -- t", 0,
			"/* t */ CREATE TABLE /*!32312 IF NOT EXISTS*/ `merged`.`w_x` (t INT COMMENT 't') -- t"},
		{"rt", `CREATE TABLE "a" ("a" INT, b VARCHAR(3) DEFAULT 'a')`, ansiQuotes, "CREATE TABLE `merged`.`a_x` (\"a\" INT, b VARCHAR(3) DEFAULT 'a')"},
		{"rt", "ALTER TABLE a RENAME AS a2", 0, "ALTER TABLE `merged`.`a_x` RENAME AS `merged`.`a2_x`"},
		{"rt", "DROP TABLE t3, `s2`", 0, "DROP TABLE `merged`.`t3_x`, `merged`.`s2_x`"},
	}
	for _, c := range cases {
		items, err := d.Feed(modeEvent(c.schema, c.q, c.mode), sluice.Position{File: "f", Pos: 10})
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if len(items) != 1 || items[0].Kind != sluice.ItemDDL {
			t.Fatalf("%s: items %+v", c.q, items)
		}
		want := c.want
		if want == "" {
			want = c.q
		}
		if got := strings.Join(items[0].DDL, ";\n"); got != want {
			t.Errorf("%s\n got  %s\n want %s", c.q, got, want)
		}
		if items[0].Session.SQLMode != c.mode || !items[0].Session.HasSQLMode {
			t.Errorf("%s: session %+v, want sql_mode %d", c.q, items[0].Session, c.mode)
		}
	}
	if tb := d.Tracker().Table(sluice.TableRef{Schema: "db", Name: "q"}); tb == nil || len(tb.Columns) != 2 || tb.Columns[1].Name != "b" {
		t.Errorf("tracker did not follow the ANSI_QUOTES statement: %+v", tb)
	}
}

// TestDDLSameShape: a DDL that renames columns among themselves, leaving
// the names in their order, is flagged: after a crash the target's
// definition alone cannot tell whether it ran.
func TestDDLSameShape(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    string
		same bool
	}{
		{"CREATE TABLE t (a INT, b INT)", false},
		{"ALTER TABLE t CHANGE a b INT, CHANGE b a INT FIRST", true},
		{"ALTER TABLE t CHANGE a b INT, CHANGE b a INT", false}, // (b, a): the order tells
		{"ALTER TABLE t RENAME COLUMN a TO c", false},
		{"ALTER TABLE t ADD COLUMN d INT", false},
	} {
		items, err := d.Feed(queryEvent("db", c.q), sluice.Position{File: "f", Pos: 10})
		if err != nil || len(items) != 1 {
			t.Fatalf("%s: %v %+v", c.q, err, items)
		}
		if items[0].SameShape != c.same {
			t.Errorf("%s: SameShape %v, want %v", c.q, items[0].SameShape, c.same)
		}
	}
}

// TestReplaceSQLSentAsWritten: the statement given to sluice replace
// reaches the target as written too (it was rendered with ENFORCED).
func TestReplaceSQLSentAsWritten(t *testing.T) {
	cfg := DefaultConfig()
	const repl = "ALTER TABLE c ADD CONSTRAINT x CHECK (a > 1)"
	cfg.Handle = func(gtid string, pos sluice.Position) *Handling {
		if pos.Pos == 20 {
			return &Handling{SQL: []string{repl}}
		}
		return nil
	}
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed(queryEvent("db", "CREATE TABLE c (a INT)"), sluice.Position{File: "f", Pos: 10}); err != nil {
		t.Fatal(err)
	}
	items, err := d.Feed(queryEvent("db", "ALTER TABLE c PARTITION BY HASH(a)"), sluice.Position{File: "f", Pos: 20})
	if err != nil || len(items) != 1 {
		t.Fatalf("%v %+v", err, items)
	}
	if got := strings.Join(items[0].DDL, ";"); got != repl {
		t.Errorf("got %s, want %s", got, repl)
	}
}
