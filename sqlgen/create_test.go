package sqlgen

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

func TestCreateDatabase(t *testing.T) {
	cases := []struct{ schema, want string }{
		{"db", "CREATE DATABASE IF NOT EXISTS `db`"},
		{"we`ird", "CREATE DATABASE IF NOT EXISTS `we``ird`"},
		{"a.b", "CREATE DATABASE IF NOT EXISTS `a.b`"},
		{"日本", "CREATE DATABASE IF NOT EXISTS `日本`"},
		{"``", "CREATE DATABASE IF NOT EXISTS ``````"},
	}
	for _, c := range cases {
		if got := CreateDatabase(c.schema); got != c.want {
			t.Errorf("CreateDatabase(%q) = %s, want %s", c.schema, got, c.want)
		}
	}
}

func TestCreateTableAs(t *testing.T) {
	tgt := sluice.TableRef{Schema: "new`db", Name: "n"}
	cases := []struct {
		name, in string
		target   sluice.TableRef
		want     string
	}{
		{"show create", "CREATE TABLE `old` (\n  `a` int\n)", tgt, "CREATE TABLE `new``db`.`n` (\n  `a` int\n)"},
		{"doubled backquote", "CREATE TABLE `o``ld` (`a` int)", tgt, "CREATE TABLE `new``db`.`n` (`a` int)"},
		{"qualified", "CREATE TABLE `s`.`old` (`a` int)", tgt, "CREATE TABLE `new``db`.`n` (`a` int)"},
		{"bare", "CREATE TABLE plain (`a` int) ENGINE=InnoDB", tgt, "CREATE TABLE `new``db`.`n` (`a` int) ENGINE=InnoDB"},
		{"bare, no space", "CREATE TABLE plain(`a` int)", tgt, "CREATE TABLE `new``db`.`n`(`a` int)"},
		{"bare qualified", "CREATE TABLE s.plain (`a` int)", tgt, "CREATE TABLE `new``db`.`n` (`a` int)"},
		// A dot inside backquotes is part of the name, not a qualifier.
		{"dot in name", "CREATE TABLE `a.b` (`a.b` int)", tgt, "CREATE TABLE `new``db`.`n` (`a.b` int)"},
		{"dot and backquote", "CREATE TABLE `x`.`a``.b` (c int)", tgt, "CREATE TABLE `new``db`.`n` (c int)"},
		{"unicode", "CREATE TABLE `tä` (`ö` int) DEFAULT CHARSET=utf8mb4", sluice.TableRef{Schema: "дб", Name: "表"},
			"CREATE TABLE `дб`.`表` (`ö` int) DEFAULT CHARSET=utf8mb4"},
		// The rest of the statement is kept byte for byte, even where it
		// names the old table.
		{"rest kept", "CREATE TABLE `old` (`a` int COMMENT 'CREATE TABLE `old`')", tgt,
			"CREATE TABLE `new``db`.`n` (`a` int COMMENT 'CREATE TABLE `old`')"},
	}
	for _, c := range cases {
		got, err := CreateTableAs(c.in, c.target)
		if err != nil || got != c.want {
			t.Errorf("%s: CreateTableAs(%q) = %q, %v; want %q", c.name, c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"",
		"CREATE VIEW v AS SELECT 1",
		"create table t (a int)", // SHOW CREATE TABLE prints upper case
		"CREATE TEMPORARY TABLE t (a int)",
		"CREATE TABLE `unterminated (a int)",
		"CREATE TABLE `s`.`unterminated (a int)",
		"CREATE TABLE t",
		"CREATE TABLE (a int)",
		"CREATE TABLE s.(a int)",
	} {
		if got, err := CreateTableAs(bad, tgt); err == nil {
			t.Errorf("CreateTableAs(%q) = %q, want an error", bad, got)
		}
	}
}

func TestCheckpointDDL(t *testing.T) {
	got := CheckpointDDL("sluice`meta")
	if len(got) != 5 {
		t.Fatalf("%d statements, want 5: %q", len(got), got)
	}
	if got[0] != "CREATE DATABASE IF NOT EXISTS `sluice``meta`" {
		t.Errorf("first statement %s", got[0])
	}
	// Each table, in the quoted schema, with the primary key that makes a
	// checkpoint row unique per task (and table, and chunk).
	for i, want := range []struct{ table, pk string }{
		{"load_task", "task VARCHAR(255) NOT NULL PRIMARY KEY"},
		{"load_plan", "PRIMARY KEY (task, tbl)"},
		{"load_checkpoint", "PRIMARY KEY (task, tbl, chunk)"},
		{"load_reset", "PRIMARY KEY (task, tbl)"},
	} {
		q := got[i+1]
		if !strings.HasPrefix(q, "CREATE TABLE IF NOT EXISTS `sluice``meta`."+want.table+" (") {
			t.Errorf("statement %d: %s, want CREATE TABLE IF NOT EXISTS of %s", i+1, q, want.table)
		}
		if !strings.Contains(q, want.pk) {
			t.Errorf("statement %d: %s lacks %s", i+1, q, want.pk)
		}
		if !strings.HasSuffix(q, ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin") {
			t.Errorf("statement %d: %s is not InnoDB utf8mb4_bin", i+1, q)
		}
	}
}
