package decode

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// TestOnlineSchemaChange: a gh-ost migration (ghost _t_gho, changelog
// _t_ghc, cut-over by RENAME t TO _t_del, _t_gho TO t) and a
// pt-online-schema-change one (_t_new, _t_old) reach the target as one
// ALTER TABLE of t at the cut-over; their helper tables never reach it,
// even when tables.include names t alone (issue 16). A restart between
// the ghost's ALTER and the cut-over (the tracker restored from its
// snapshot, as from a checkpoint) loses nothing.
func TestOnlineSchemaChange(t *testing.T) {
	for _, only := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.Selected = func(r sluice.TableRef) bool { return r.Schema == "db" && (!only || r.Name == "t") }
		cfg.SchemaSelected = func(s string) bool { return s == "db" }
		tr := schema.NewTracker()
		d, err := New(cfg, tr)
		if err != nil {
			t.Fatal(err)
		}
		feed := func(q string) []string {
			t.Helper()
			items, err := d.Feed(queryEvent("db", q), sluice.Position{File: "f", Pos: 10})
			if err != nil {
				t.Fatalf("only=%v: %s: %v", only, q, err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.DDL...)
			}
			return got
		}
		feed("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
		for _, q := range []string{"CREATE TABLE _t_ghc (id BIGINT PRIMARY KEY, hint VARCHAR(64))", "CREATE TABLE _t_gho LIKE t",
			"ALTER TABLE _t_gho ADD COLUMN w INT NOT NULL DEFAULT 7"} {
			if got := feed(q); len(got) != 0 {
				t.Fatalf("only=%v: %s reached the target: %q", only, q, got)
			}
		}
		// A restart: the tracker comes back from its last snapshot.
		snap, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		tr = schema.NewTracker()
		if err := tr.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if d, err = New(cfg, tr); err != nil {
			t.Fatal(err)
		}
		if got := feed("ALTER TABLE _t_gho ADD KEY kv (v)"); len(got) != 0 {
			t.Fatalf("only=%v: the ghost's second ALTER reached the target: %q", only, got)
		}
		if d.selected(sluice.TableRef{Schema: "db", Name: "_t_gho"}) {
			t.Fatalf("only=%v: the ghost's rows would reach the target", only)
		}
		got := feed("RENAME TABLE t TO _t_del, _t_gho TO t")
		want := "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `w` INT NOT NULL DEFAULT 7\\nALTER TABLE `db`.`t` ADD INDEX IF NOT EXISTS `kv`(`v`)"
		if strings.Join(got, "\\n") != want {
			t.Fatalf("only=%v: cut-over\\n got  %q\\n want %q", only, got, want)
		}
		if tb := tr.Table(sluice.TableRef{Schema: "db", Name: "t"}); tb == nil || len(tb.Columns) != 3 {
			t.Fatalf("only=%v: the tracker's t after the cut-over: %+v", only, tb)
		}
		for _, q := range []string{"DROP TABLE IF EXISTS _t_del", "DROP TABLE IF EXISTS _t_ghc"} {
			if got := feed(q); len(got) != 0 {
				t.Fatalf("only=%v: %s reached the target: %q", only, q, got)
			}
		}
		// pt-online-schema-change.
		feed("CREATE TABLE _t_new LIKE t")
		feed("ALTER TABLE _t_new MODIFY COLUMN v BIGINT")
		if got := feed("RENAME TABLE t TO _t_old, _t_new TO t"); strings.Join(got, ";") != "ALTER TABLE `db`.`t` MODIFY COLUMN IF EXISTS `v` BIGINT" {
			t.Fatalf("only=%v: pt-osc cut-over: %q", only, got)
		}
		if got := feed("DROP TABLE IF EXISTS _t_old"); len(got) != 0 {
			t.Fatalf("only=%v: DROP of _t_old: %q", only, got)
		}
	}
}
