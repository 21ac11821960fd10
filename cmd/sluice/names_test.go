package main

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestOddNamesCopiedAndReplicated: a table named a/b was never selected
// (*.* skipped it in silence, and verify then said "equal"), and a schema
// x.y needed an undocumented x?y. Both are copied and replicated, named by
// *.* and by quoted patterns, and verify compares them.
func TestOddNamesCopiedAndReplicated(t *testing.T) {
	src := sandboxtest.Start(t, "nsrc")
	dst := sandboxtest.Start(t, "ndst")
	sdb := sandboxtest.MustOpen(t, src, "")
	ddb := sandboxtest.MustOpen(t, dst, "")
	sandboxtest.MustExec(t, sdb, "CREATE DATABASE app", "CREATE TABLE app.`a/b` (id INT PRIMARY KEY, v VARCHAR(8))",
		"INSERT INTO app.`a/b` VALUES (1, 'one'), (2, 'two')",
		"CREATE DATABASE `x.y`", "CREATE TABLE `x.y`.t (id INT PRIMARY KEY)", "INSERT INTO `x.y`.t VALUES (1), (2), (3)",
		"CREATE TABLE `x.y`.`a/b` (id INT PRIMARY KEY)", "INSERT INTO `x.y`.`a/b` VALUES (7)",
		"CREATE DATABASE x", "CREATE TABLE x.`y.t` (id INT PRIMARY KEY)", "INSERT INTO x.`y.t` VALUES (9)")
	contents := func(db *sql.DB) string {
		var parts []string
		for _, q := range []string{"SELECT GROUP_CONCAT(id, v ORDER BY id) FROM app.`a/b`", "SELECT GROUP_CONCAT(id ORDER BY id) FROM `x.y`.t",
			"SELECT GROUP_CONCAT(id ORDER BY id) FROM `x.y`.`a/b`", "SELECT GROUP_CONCAT(id ORDER BY id) FROM x.`y.t`"} {
			var s sql.NullString
			if err := db.QueryRow(q).Scan(&s); err != nil {
				parts = append(parts, "error: "+err.Error())
				continue
			}
			parts = append(parts, s.String)
		}
		return strings.Join(parts, " | ")
	}
	for _, c := range []struct{ name, include string }{
		{"star", `"*.*"`},
		{"quoted", "\"app.`a/b`\", \"`x.y`.*\", \"x.`y.t`\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sandboxtest.MustExec(t, ddb, "DROP DATABASE IF EXISTS app", "DROP DATABASE IF EXISTS `x.y`", "DROP DATABASE IF EXISTS x", "DROP DATABASE IF EXISTS sluice_meta")
			body := fmt.Sprintf(`name: odd%s
source: {host: %s, port: %d, user: root}
target: {host: %s, port: %d, user: root}
tables:
  include: [%s]
dir: %s
`, c.name, "127.0.0.1", src.Port, "127.0.0.1", dst.Port, c.include, t.TempDir())
			cfg := verifyTask(t, body)
			r := startMigrateAll(cfg)
			defer r.stop()
			if !r.waitOutput("replicate odd" + c.name + ":") {
				t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
			}
			sandboxtest.MustExec(t, sdb, "INSERT INTO app.`a/b` VALUES (3, 'three')", "UPDATE `x.y`.t SET id = 30 WHERE id = 3",
				"INSERT INTO `x.y`.`a/b` VALUES (8)", "DELETE FROM x.`y.t`", "INSERT INTO x.`y.t` VALUES (10)")
			if !r.covered(t, ddb, "odd"+c.name, binlogPos(t, sdb)) {
				t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
			}
			if s, d := contents(sdb), contents(ddb); s != d {
				t.Fatalf("target differs:\n source %s\n target %s\n%s", s, d, r.out.String())
			}
			r.stop()
			out, _, err := verifyCLI(t, "--config", cfg)
			if err != nil || !strings.Contains(out, "4 tables") {
				t.Fatalf("verify: %v\n%s", err, out)
			}
			// Undo the source changes for the next case.
			sandboxtest.MustExec(t, sdb, "DELETE FROM app.`a/b` WHERE id = 3", "UPDATE `x.y`.t SET id = 3 WHERE id = 30",
				"DELETE FROM `x.y`.`a/b` WHERE id = 8", "DELETE FROM x.`y.t`", "INSERT INTO x.`y.t` VALUES (9)")
		})
	}
}
