package replicate_test

import (
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestOnlineDDLNames (issue 29, N5) replicates, end to end, tables whose
// names look like an online schema change's helpers. Without a tool named
// in the task they are ordinary tables: a user's RENAME TABLE d3 TO
// _d3_old, CREATE TABLE d3 LIKE _d3_old keeps the old rows in _d3_old and
// the new ones in d3 (before: the old rows stayed in d3 on the target), and
// a real table _orders_old keeps receiving its changes (before: every
// change was dropped). With gh-ost named, a gh-ost-shaped run (changelog,
// ghost, copy, atomic cut-over, drops) reaches the target as one ALTER.
func TestOnlineDDLNames(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	for _, c := range []struct {
		schema, tool string
		stmts        []string
	}{
		{"odn", "", []string{
			"CREATE TABLE odn.d3 (id INT PRIMARY KEY, v INT)", "INSERT INTO odn.d3 VALUES (1, 1), (2, 2)",
			"CREATE TABLE odn.orders (id INT PRIMARY KEY, v INT)", "CREATE TABLE odn._orders_old (id INT PRIMARY KEY, v INT)",
			"INSERT INTO odn._orders_old VALUES (1, 1)",
			"RENAME TABLE odn.d3 TO odn._d3_old", "CREATE TABLE odn.d3 LIKE odn._d3_old", "INSERT INTO odn.d3 VALUES (3, 3)",
			"INSERT INTO odn._orders_old VALUES (2, 2)", "UPDATE odn._orders_old SET v = 10 WHERE id = 1",
		}},
		{"odg", decode.OnlineGhost, []string{
			"CREATE TABLE odg.t (id INT PRIMARY KEY, v INT)", "INSERT INTO odg.t VALUES (1, 1), (2, 2)",
			"DROP TABLE IF EXISTS odg._t_gho", "CREATE TABLE odg._t_ghc (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64))",
			"CREATE TABLE odg._t_gho LIKE odg.t", "ALTER TABLE odg._t_gho ADD COLUMN w INT NOT NULL DEFAULT 7",
			"INSERT INTO odg._t_ghc (hint) VALUES ('state: migrating')",
			"INSERT INTO odg._t_gho (id, v) SELECT id, v FROM odg.t", "INSERT INTO odg.t VALUES (3, 3)", "REPLACE INTO odg._t_gho (id, v) VALUES (3, 3)",
			"CREATE TABLE odg._t_del (id INT AUTO_INCREMENT PRIMARY KEY) COMMENT='ghost-cut-over-sentry'", "DROP TABLE odg._t_del",
			"RENAME TABLE odg.t TO odg._t_del, odg._t_gho TO odg.t",
			"DROP TABLE odg._t_del", "DROP TABLE odg._t_ghc", "INSERT INTO odg.t VALUES (4, 4, 4)",
		}},
	} {
		t.Run(c.schema, func(t *testing.T) {
			start := masterStatus(t, src)
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+c.schema)
			cfg := taskConfig(t, c.schema, srcInst, dstInst, start)
			cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == c.schema }
			cfg.Decode.SchemaSelected = func(s string) bool { return s == c.schema }
			cfg.Decode.OnlineDDL = c.tool
			r := run(t, cfg)
			sandboxtest.MustExec(t, src, c.stmts...)
			r.waitApplied(t, masterStatus(t, src))
			r.stop(t)
			sameData(t, srcInst, dstInst, c.schema)
			dst := sandboxtest.MustOpen(t, dstInst, "")
			var n int
			if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", c.schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			var want int
			if err := src.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", c.schema).Scan(&want); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Fatalf("the target has %d tables in %s, the source %d", n, c.schema, want)
			}
		})
	}
}
