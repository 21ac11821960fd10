package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// describe renders a tracked table: its columns (name, full type,
// unsigned, NULL, character set, generated) and its keys as build() reports
// them, the one chosen to identify rows first and marked "pk" (primary)
// or "uk" (a NOT NULL unique key).
func describe(tb *sluice.Table) (cols, keys string) {
	var cs []string
	for _, c := range tb.Columns {
		s := c.Name + " " + c.FullType
		// The tracker's full type leaves UNSIGNED to the flag.
		if c.Unsigned && !strings.Contains(c.FullType, "unsigned") {
			s += " unsigned"
		}
		if !c.Nullable {
			s += " not null"
		}
		if c.Charset != "" {
			s += " " + c.Charset
		}
		if c.Generated {
			s += " gen"
		}
		cs = append(cs, s)
	}
	var ks []string
	if tb.HasKey() {
		kind := "uk"
		if tb.PKIsPrimary {
			kind = "pk"
		}
		ks = append(ks, kind+colNames(tb, tb.PK))
	}
	for i, k := range tb.UniqueKeys {
		ks = append(ks, tb.UniqueKeyNames[i]+colNames(tb, k))
	}
	return strings.Join(cs, ", "), strings.Join(ks, " ")
}

func colNames(tb *sluice.Table, idx []int) string {
	var n []string
	for _, i := range idx {
		n = append(n, tb.Columns[i].Name)
	}
	return "(" + strings.Join(n, ",") + ")"
}

// TestTrackerDDL: DDL in (run in schema db on a tracker that has seen
// setup), tracked definition of db.t (or table) out.
func TestTrackerDDL(t *testing.T) {
	cases := []struct {
		name  string
		setup []string
		ddl   string
		table string // default "t"
		cols  string
		keys  string
		gone  []string // tables no longer tracked
		err   bool     // refused with ErrUnsupportedDDL, nothing changed
	}{
		// CREATE TABLE
		{name: "create", ddl: "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, v VARCHAR(10), PRIMARY KEY (id))",
			cols: "id int(11) not null, v varchar(10)", keys: "pk(id) PRIMARY(id)"},
		{name: "inline keys", ddl: "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, u INT UNIQUE, n INT NOT NULL UNIQUE KEY)",
			cols: "id bigint(20) unsigned not null, u int(11), n int(11) not null", keys: "pk(id) PRIMARY(id) u(u) n(n)"},
		// Without a primary key, the narrowest NOT NULL unique key identifies rows.
		{name: "not null unique", ddl: "CREATE TABLE t (a INT, b INT NOT NULL, c INT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ubc (b, c), UNIQUE KEY uc (c))",
			cols: "a int(11), b int(11) not null, c int(11) not null", keys: "uk(c) ua(a) uc(c) ubc(b,c)"},
		{name: "composite primary", ddl: "CREATE TABLE t (a INT, b VARCHAR(5), PRIMARY KEY (b, a))",
			cols: "a int(11) not null, b varchar(5) not null", keys: "pk(b,a) PRIMARY(b,a)"},
		{name: "unnamed unique keys", ddl: "CREATE TABLE t (a INT NOT NULL, b INT, UNIQUE (a), UNIQUE (a, b), UNIQUE KEY (b))",
			cols: "a int(11) not null, b int(11)", keys: "uk(a) a(a) b(b) a_2(a,b)"},
		// A key over a prefix cannot identify rows by column values.
		{name: "prefix key", ddl: "CREATE TABLE t (a VARCHAR(20) NOT NULL, UNIQUE KEY pa (a(5)))",
			cols: "a varchar(20) not null", keys: ""},
		// A column's own character set (utf8mb3 is the parser's utf8).
		{name: "charsets", ddl: "CREATE TABLE t (a VARCHAR(5) CHARACTER SET latin1, c VARBINARY(3), d CHAR(2) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_nopad_ci, e TEXT CHARSET cp1251 COLLATE cp1251_bin) DEFAULT CHARSET=utf8mb4",
			cols: "a varchar(5) latin1, c varbinary(3) binary, d char(2) utf8, e text cp1251"},
		// A COLLATE alone names the character set too.
		{name: "collation names its charset", ddl: "CREATE TABLE t (b TEXT COLLATE utf8mb4_bin, c VARCHAR(3) COLLATE latin1_bin, e VARCHAR(2) COLLATE utf8mb4_nopad_bin) DEFAULT CHARSET=cp1251",
			cols: "b text utf8mb4, c varchar(3) latin1, e varchar(2) utf8mb4"},
		{name: "modify collation", setup: []string{"CREATE TABLE t (a VARCHAR(5) CHARACTER SET latin1)"}, ddl: "ALTER TABLE t MODIFY a VARCHAR(5) COLLATE utf8mb4_unicode_ci",
			cols: "a varchar(5) utf8mb4"},
		{name: "convert charset", setup: []string{"CREATE TABLE t (a VARCHAR(5) CHARACTER SET latin1)"}, ddl: "ALTER TABLE t MODIFY a VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
			cols: "a varchar(5) utf8mb4"},
		{name: "generated", ddl: "CREATE TABLE t (a INT, b INT AS (a+1) VIRTUAL, c INT GENERATED ALWAYS AS (a*2) STORED, d INT AS (a) PERSISTENT)",
			cols: "a int(11), b int(11) gen, c int(11) gen, d int(11) gen"},
		{name: "enum keeps case", ddl: "CREATE TABLE t (e ENUM('S','s') NOT NULL DEFAULT 'S', s SET('A','b'))",
			cols: "e enum('S','s') not null, s set('A','b')"},
		{name: "if not exists, exists", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "CREATE TABLE IF NOT EXISTS t (b INT PRIMARY KEY)",
			cols: "a int(11)"},
		{name: "if not exists, new", ddl: "CREATE TABLE IF NOT EXISTS t (b INT PRIMARY KEY)",
			cols: "b int(11) not null", keys: "pk(b) PRIMARY(b)"},
		{name: "temporary", ddl: "CREATE TEMPORARY TABLE t (a INT)", gone: []string{"db.t"}},
		{name: "other schema", ddl: "CREATE TABLE other.t (a INT PRIMARY KEY)", table: "other.t",
			cols: "a int(11) not null", keys: "pk(a) PRIMARY(a)", gone: []string{"db.t"}},
		{name: "like", setup: []string{"CREATE TABLE t0 (a INT PRIMARY KEY, b CHAR(1) CHARACTER SET latin1, UNIQUE KEY ub (b))"}, ddl: "CREATE TABLE t LIKE t0",
			cols: "a int(11) not null, b char(1) latin1", keys: "pk(a) PRIMARY(a) ub(b)"},
		{name: "like other schema", setup: []string{"CREATE TABLE other.t0 (a INT NOT NULL UNIQUE)"}, ddl: "CREATE TABLE t LIKE other.t0",
			cols: "a int(11) not null", keys: "uk(a) a(a)"},
		{name: "like untracked", ddl: "CREATE TABLE t LIKE nowhere", err: true},
		{name: "create select", ddl: "CREATE TABLE t SELECT 1 AS a", err: true},
		{name: "or replace", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "CREATE OR REPLACE TABLE t (b INT PRIMARY KEY)",
			cols: "b int(11) not null", keys: "pk(b) PRIMARY(b)"},
		{name: "mariadb comments", ddl: "CREATE TABLE t (id INT PRIMARY KEY, c INT /*M!100301 INVISIBLE */) /*!100500 PAGE_CHECKSUM=1 */",
			cols: "id int(11) not null, c int(11)", keys: "pk(id) PRIMARY(id)"},

		// DROP
		{name: "drop", setup: []string{"CREATE TABLE t (a INT)", "CREATE TABLE u (a INT)"}, ddl: "DROP TABLE IF EXISTS t, nowhere",
			gone: []string{"db.t"}, table: "db.u", cols: "a int(11)"},
		{name: "drop temporary", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "DROP TEMPORARY TABLE IF EXISTS t", cols: "a int(11)"},
		{name: "drop database", setup: []string{"CREATE TABLE t (a INT)", "CREATE TABLE u (a INT)", "CREATE TABLE other.t (b INT)"},
			ddl: "DROP DATABASE db", gone: []string{"db.t", "db.u"}, table: "other.t", cols: "b int(11)"},
		{name: "truncate", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "TRUNCATE TABLE t", cols: "a int(11)"},

		// RENAME
		{name: "rename", setup: []string{"CREATE TABLE t0 (a INT PRIMARY KEY)"}, ddl: "RENAME TABLE t0 TO t",
			gone: []string{"db.t0"}, cols: "a int(11) not null", keys: "pk(a) PRIMARY(a)"},
		{name: "rename swap", setup: []string{"CREATE TABLE t (a INT)", "CREATE TABLE u (b INT)"}, ddl: "RENAME TABLE t TO tmp, u TO t, tmp TO u",
			gone: []string{"db.tmp"}, cols: "b int(11)"},
		{name: "rename across schemas", setup: []string{"CREATE TABLE other.x (a INT)"}, ddl: "RENAME TABLE other.x TO t",
			gone: []string{"other.x"}, cols: "a int(11)"},
		{name: "rename untracked", ddl: "RENAME TABLE nowhere TO t", err: true},
		// RENAME TABLE is atomic: a failing pair undoes the ones before it.
		{name: "rename partly untracked", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "RENAME TABLE t TO t2, nowhere TO t3",
			err: true, gone: []string{"db.t2"}, cols: "a int(11)"},
		{name: "alter rename", setup: []string{"CREATE TABLE t0 (a INT)"}, ddl: "ALTER TABLE t0 RENAME TO t, ADD COLUMN b INT FIRST",
			gone: []string{"db.t0"}, cols: "b int(11), a int(11)"},
		{name: "alter rename to schema", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t RENAME other.u",
			gone: []string{"db.t"}, table: "other.u", cols: "a int(11)"},

		// ALTER TABLE: columns
		{name: "add first after", setup: []string{"CREATE TABLE t (a INT, b INT)"}, ddl: "ALTER TABLE t ADD COLUMN x INT FIRST, ADD y TEXT AFTER a, ADD z INT",
			cols: "x int(11), a int(11), y text, b int(11), z int(11)"},
		{name: "add several", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t ADD (x INT NOT NULL, y INT UNIQUE)",
			cols: "a int(11), x int(11) not null, y int(11)", keys: "y(y)"},
		{name: "add if not exists", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t ADD COLUMN IF NOT EXISTS a BIGINT, ADD COLUMN IF NOT EXISTS b INT",
			cols: "a int(11), b int(11)"},
		{name: "add after missing", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t ADD b INT AFTER nope", err: true},
		{name: "drop column", setup: []string{"CREATE TABLE t (a INT, b INT, c INT, UNIQUE KEY ub (b))"}, ddl: "ALTER TABLE t DROP COLUMN b, DROP c",
			cols: "a int(11)"},
		{name: "drop column if exists", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t DROP COLUMN IF EXISTS nope", cols: "a int(11)"},
		{name: "drop missing column", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t DROP COLUMN nope", err: true},
		{name: "drop column twice", setup: []string{"CREATE TABLE t (a INT, b INT)"}, ddl: "ALTER TABLE t DROP b, DROP b", err: true},
		{name: "modify", setup: []string{"CREATE TABLE t (a INT, b INT)"}, ddl: "ALTER TABLE t MODIFY a BIGINT UNSIGNED NOT NULL, MODIFY COLUMN b VARCHAR(3) CHARACTER SET latin1 FIRST",
			cols: "b varchar(3) latin1, a bigint(20) unsigned not null"},
		// A primary key's columns are NOT NULL whatever a MODIFY or CHANGE
		// says (MariaDB sets them so): the table keeps its key.
		{name: "modify primary key column", setup: []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT)"}, ddl: "ALTER TABLE t MODIFY id BIGINT",
			cols: "id bigint(20) not null, v int(11)", keys: "pk(id) PRIMARY(id)"},
		{name: "change primary key column", setup: []string{"CREATE TABLE t (a INT, b INT, PRIMARY KEY (a, b))"}, ddl: "ALTER TABLE t CHANGE b c BIGINT NULL",
			cols: "a int(11) not null, c bigint(20) not null", keys: "pk(a,c) PRIMARY(a,c)"},
		{name: "modify unique column to null", setup: []string{"CREATE TABLE t (a INT NOT NULL, UNIQUE KEY ua (a))"}, ddl: "ALTER TABLE t MODIFY a INT NULL",
			cols: "a int(11)", keys: "ua(a)"},
		{name: "change", setup: []string{"CREATE TABLE t (a INT NOT NULL, b INT, UNIQUE KEY ua (a))"}, ddl: "ALTER TABLE t CHANGE COLUMN a x BIGINT NOT NULL AFTER b",
			cols: "b int(11), x bigint(20) not null", keys: "uk(x) ua(x)"},
		{name: "change missing", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t CHANGE nope x INT", err: true},
		{name: "change if exists", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t CHANGE COLUMN IF EXISTS nope x INT", cols: "a int(11)"},
		{name: "rename column", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY, b INT)"}, ddl: "ALTER TABLE t RENAME COLUMN a TO id",
			cols: "id int(11) not null, b int(11)", keys: "pk(id) PRIMARY(id)"},
		{name: "alter column default", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t ALTER COLUMN a SET DEFAULT 5", cols: "a int(11)"},
		{name: "options only", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY)"}, ddl: "ALTER TABLE t ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE, FORCE",
			cols: "a int(11) not null", keys: "pk(a) PRIMARY(a)"},
		{name: "several clauses", setup: []string{"CREATE TABLE t (id INT, a INT, b INT, UNIQUE KEY ua (a))"},
			ddl:  "ALTER TABLE t ADD PRIMARY KEY (id), DROP INDEX ua, ADD COLUMN c INT NOT NULL AFTER id, ADD UNIQUE KEY uc (c), DROP COLUMN b, ENGINE=InnoDB",
			cols: "id int(11) not null, c int(11) not null, a int(11)", keys: "pk(id) PRIMARY(id) uc(c)"},
		{name: "partitioning refused", setup: []string{"CREATE TABLE t (a INT)"}, ddl: "ALTER TABLE t ADD COLUMN b INT, COALESCE PARTITION 2", err: true, cols: "a int(11)"},
		{name: "alter untracked", ddl: "ALTER TABLE nowhere ADD COLUMN a INT", err: true},

		// ALTER TABLE, CREATE and DROP INDEX: keys
		{name: "add primary key", setup: []string{"CREATE TABLE t (a INT, b INT)"}, ddl: "ALTER TABLE t ADD PRIMARY KEY (b, a)",
			cols: "a int(11) not null, b int(11) not null", keys: "pk(b,a) PRIMARY(b,a)"},
		{name: "drop primary key", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY, b INT NOT NULL, UNIQUE KEY ub (b))"}, ddl: "ALTER TABLE t DROP PRIMARY KEY",
			cols: "a int(11) not null, b int(11) not null", keys: "uk(b) ub(b)"},
		// Without its primary key a column may be NULL again.
		{name: "drop primary key, modify", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY)"}, ddl: "ALTER TABLE t DROP PRIMARY KEY, MODIFY a INT",
			cols: "a int(11)"},
		{name: "replace primary key", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY, b INT)"}, ddl: "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (b)",
			cols: "a int(11) not null, b int(11) not null", keys: "pk(b) PRIMARY(b)"},
		{name: "add unique", setup: []string{"CREATE TABLE t (a INT NOT NULL, b INT)"}, ddl: "ALTER TABLE t ADD UNIQUE INDEX ub (b), ADD CONSTRAINT ca UNIQUE KEY (a)",
			cols: "a int(11) not null, b int(11)", keys: "uk(a) ub(b) ca(a)"},
		{name: "drop index", setup: []string{"CREATE TABLE t (a INT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ua2 (a))"}, ddl: "ALTER TABLE t DROP INDEX ua, DROP KEY IF EXISTS nope",
			cols: "a int(11) not null", keys: "uk(a) ua2(a)"},
		{name: "rename index", setup: []string{"CREATE TABLE t (a INT NOT NULL, UNIQUE KEY ua (a))"}, ddl: "ALTER TABLE t RENAME INDEX ua TO ub",
			cols: "a int(11) not null", keys: "uk(a) ub(a)"},
		{name: "create unique index", setup: []string{"CREATE TABLE t (a INT NOT NULL, b INT)"}, ddl: "CREATE UNIQUE INDEX ua ON t (a)",
			cols: "a int(11) not null, b int(11)", keys: "uk(a) ua(a)"},
		{name: "create index", setup: []string{"CREATE TABLE t (a INT NOT NULL)"}, ddl: "CREATE INDEX ia ON t (a)", cols: "a int(11) not null"},
		{name: "drop index statement", setup: []string{"CREATE TABLE t (a INT NOT NULL, UNIQUE KEY ua (a))"}, ddl: "DROP INDEX ua ON t", cols: "a int(11) not null"},
		{name: "drop primary index statement", setup: []string{"CREATE TABLE t (a INT PRIMARY KEY)"}, ddl: "DROP INDEX `PRIMARY` ON t", cols: "a int(11) not null"},
		// Unnamed indexes take their first column's name; a unique key
		// after a plain index on the same column is a_2, and DROP INDEX
		// finds each by the server's name.
		{name: "unique after plain index", setup: []string{"CREATE TABLE t (a INT NOT NULL, KEY (a), UNIQUE (a))"}, ddl: "ALTER TABLE t DROP INDEX a_2",
			cols: "a int(11) not null"},
		{name: "plain index before unique", setup: []string{"CREATE TABLE t (a INT NOT NULL, KEY (a), UNIQUE (a))"}, ddl: "ALTER TABLE t DROP INDEX a",
			cols: "a int(11) not null", keys: "uk(a) a_2(a)"},
		{name: "unique after prefix key", setup: []string{"CREATE TABLE t (b VARCHAR(20) NOT NULL, UNIQUE (b(5)), UNIQUE (b))"}, ddl: "ALTER TABLE t DROP INDEX b_2",
			cols: "b varchar(20) not null"},
		{name: "added index names", setup: []string{"CREATE TABLE t (a INT NOT NULL)"}, ddl: "ALTER TABLE t ADD INDEX (a), ADD UNIQUE (a)",
			cols: "a int(11) not null", keys: "uk(a) a_2(a)"},
		{name: "created index names", setup: []string{"CREATE TABLE t (a INT NOT NULL, FULLTEXT KEY a (a))", "CREATE INDEX a_2 ON t (a)"}, ddl: "ALTER TABLE t ADD UNIQUE (a)",
			cols: "a int(11) not null", keys: "uk(a) a_3(a)"},
		{name: "spatial index name", setup: []string{"CREATE TABLE t (id INT NOT NULL, g GEOMETRY NOT NULL, SPATIAL INDEX id (g))"}, ddl: "ALTER TABLE t ADD UNIQUE (id)",
			cols: "id int(11) not null, g geometry not null", keys: "uk(id) id_2(id)"},
		// IF NOT EXISTS on a taken name changes nothing (MariaDB).
		{name: "create unique index if not exists", setup: []string{"CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, KEY u (b))"},
			ddl: "CREATE UNIQUE INDEX IF NOT EXISTS u ON t (a)", cols: "a int(11) not null, b int(11) not null"},
		{name: "create unique index if not exists, new", setup: []string{"CREATE TABLE t (a INT NOT NULL)"},
			ddl: "CREATE UNIQUE INDEX IF NOT EXISTS u ON t (a)", cols: "a int(11) not null", keys: "uk(a) u(a)"},
		{name: "add index if not exists", setup: []string{"CREATE TABLE t (a INT NOT NULL, UNIQUE KEY u (a))"},
			ddl: "ALTER TABLE t ADD INDEX IF NOT EXISTS u (a), ADD INDEX IF NOT EXISTS a (a), ADD UNIQUE (a)", cols: "a int(11) not null", keys: "uk(a) u(a) a_2(a)"},
		// Keys follow their columns through renames and lose dropped ones.
		{name: "keys follow columns", setup: []string{"CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, c INT, KEY (c), UNIQUE KEY uab (a, b))"},
			ddl:  "ALTER TABLE t CHANGE a x INT NOT NULL, RENAME COLUMN b TO y, DROP COLUMN c, ADD UNIQUE (x)",
			cols: "x int(11) not null, y int(11) not null", keys: "uk(x) x(x) uab(x,y)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker()
			mustApply(t, tr, "db", c.setup...)
			before := tr.Version()
			stmts, err := tr.Parse(c.ddl)
			if err != nil {
				t.Fatalf("parse %q: %v", c.ddl, err)
			}
			for _, st := range stmts {
				if err = tr.Apply("db", st); err != nil {
					break
				}
			}
			if c.err {
				if !errors.Is(err, sluice.ErrUnsupportedDDL) {
					t.Fatalf("%s: %v, want ErrUnsupportedDDL", c.ddl, err)
				}
				if tr.Version() != before {
					t.Fatalf("%s: refused, yet the version moved", c.ddl)
				}
			} else if err != nil {
				t.Fatalf("%s: %v", c.ddl, err)
			}
			for _, g := range c.gone {
				s, n, _ := strings.Cut(g, ".")
				if tr.Table(sluice.TableRef{Schema: s, Name: n}) != nil {
					t.Errorf("%s: %s is still tracked", c.ddl, g)
				}
			}
			name := c.table
			if name == "" {
				name = "db.t"
			}
			if c.cols == "" && c.keys == "" {
				return
			}
			s, n, _ := strings.Cut(name, ".")
			tb := tr.Table(sluice.TableRef{Schema: s, Name: n})
			if tb == nil {
				t.Fatalf("%s: %s is not tracked", c.ddl, name)
			}
			cols, keys := describe(tb)
			if cols != c.cols || keys != c.keys {
				t.Errorf("%s\n got  %s | %s\n want %s | %s", c.ddl, cols, keys, c.cols, c.keys)
			}
		})
	}
}
