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
		cfg.OnlineDDL = OnlineGhost
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
		// pt-online-schema-change, on the same tracker.
		cfg.OnlineDDL = OnlinePTOSC
		if d, err = New(cfg, tr); err != nil {
			t.Fatal(err)
		}
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

// onlineDecoder is a decoder of schema db with the tool named, fed by feed.
func onlineDecoder(t *testing.T, tool string) (*Decoder, func(q string) []string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OnlineDDL = tool
	cfg.Selected = func(r sluice.TableRef) bool { return r.Schema == "db" }
	cfg.SchemaSelected = func(s string) bool { return s == "db" }
	d, err := New(cfg, schema.NewTracker())
	if err != nil {
		t.Fatal(err)
	}
	return d, func(q string) []string {
		t.Helper()
		items, err := d.Feed(queryEvent("db", q), sluice.Position{File: "f", Pos: 10})
		if err != nil {
			t.Fatalf("%s: %s: %v", tool, q, err)
		}
		var got []string
		for _, it := range items {
			got = append(got, it.DDL...)
		}
		return got
	}
}

// TestOnlineDDLNameIsNoProof: tables named like an online schema change's
// helpers are ordinary tables unless the task names the tool, and even
// then unless they belong to a running sequence of it (issue 29, N5).
// Before, `RENAME TABLE d3 TO _d3_old; CREATE TABLE d3 LIKE _d3_old` kept
// the old d3 (and its rows) on the target, and a real table _orders_old
// lost every change after the copy.
func TestOnlineDDLNameIsNoProof(t *testing.T) {
	for _, tool := range []string{"", OnlineNone, OnlinePTOSC, OnlineGhost} {
		d, feed := onlineDecoder(t, tool)
		feed("CREATE TABLE d3 (id INT PRIMARY KEY, v INT)")
		// The source's own text goes to the target (issue 29 N8), run in
		// the statement's default schema.
		if got := feed("RENAME TABLE d3 TO _d3_old"); len(got) != 1 || got[0] != "RENAME TABLE d3 TO _d3_old" {
			t.Fatalf("tool %q: the user's RENAME d3 TO _d3_old on the target: %q", tool, got)
		}
		if got := feed("CREATE TABLE d3 LIKE _d3_old"); len(got) != 1 || !strings.Contains(got[0], "CREATE TABLE") {
			t.Fatalf("tool %q: CREATE TABLE d3 LIKE _d3_old on the target: %q", tool, got)
		}
		for _, n := range []string{"_d3_old", "d3"} {
			if !d.selected(sluice.TableRef{Schema: "db", Name: n}) {
				t.Fatalf("tool %q: the rows of %s stay off the target", tool, n)
			}
		}
		// A real table named like a helper, there before the task (the
		// full copy put it on the target and in the tracker).
		feed("CREATE TABLE orders (id INT PRIMARY KEY)")
		feed("CREATE TABLE _orders_old (id INT PRIMARY KEY)")
		feed("CREATE TABLE _orders_gho (id INT PRIMARY KEY)")
		for _, n := range []string{"_orders_old", "_orders_new", "_orders_del", "_orders_ghc"} {
			if !d.selected(sluice.TableRef{Schema: "db", Name: n}) {
				t.Fatalf("tool %q: the rows of the real table %s stay off the target", tool, n)
			}
		}
		if got := feed("ALTER TABLE _orders_old ADD COLUMN c INT"); len(got) != 1 {
			t.Fatalf("tool %q: ALTER of the real table _orders_old: %q", tool, got)
		}
		if got := feed("DROP TABLE _orders_old"); len(got) != 1 {
			t.Fatalf("tool %q: DROP of the real table _orders_old: %q", tool, got)
		}
		// Without the tool, the gh-ost-shaped CREATE is an ordinary table too.
		if tool != OnlineGhost && !d.selected(sluice.TableRef{Schema: "db", Name: "_orders_gho"}) {
			t.Fatalf("tool %q: _orders_gho is a helper", tool)
		}
	}
}

// TestOnlineDDLTwoStepCutOver: gh-ost's two-step cut-over (RENAME t TO
// _t_del, then RENAME _t_gho TO t) with the tool named: the target keeps
// t and gets the ghost's ALTER; the old table and its DROP stay off.
func TestOnlineDDLTwoStepCutOver(t *testing.T) {
	d, feed := onlineDecoder(t, OnlineGhost)
	feed("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	for _, q := range []string{"DROP TABLE IF EXISTS _t_gho", "CREATE TABLE _t_ghc (id BIGINT PRIMARY KEY)", "CREATE TABLE _t_gho LIKE t",
		"ALTER TABLE _t_gho ADD COLUMN w INT", "RENAME TABLE t TO _t_del"} {
		got := feed(q)
		if strings.HasPrefix(q, "DROP") {
			continue // an ordinary DROP ... IF EXISTS: no helper yet
		}
		if len(got) != 0 {
			t.Fatalf("%s reached the target: %q", q, got)
		}
	}
	if d.selected(sluice.TableRef{Schema: "db", Name: "_t_gho"}) || d.selected(sluice.TableRef{Schema: "db", Name: "_t_ghc"}) {
		t.Fatal("a helper's rows reach the target")
	}
	if got := feed("RENAME TABLE _t_gho TO t"); strings.Join(got, ";") != "ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `w` INT" {
		t.Fatalf("cut-over: %q", got)
	}
	if d.selected(sluice.TableRef{Schema: "db", Name: "_t_del"}) || !d.selected(sluice.TableRef{Schema: "db", Name: "t"}) {
		t.Fatal("after the cut-over: _t_del selected or t not")
	}
	for _, q := range []string{"DROP TABLE IF EXISTS _t_del", "DROP TABLE IF EXISTS _t_ghc"} {
		if got := feed(q); len(got) != 0 {
			t.Fatalf("%s reached the target: %q", q, got)
		}
	}
	// The sequence is over: a later table of the same name is ordinary.
	if got := feed("RENAME TABLE t TO _t_del"); len(got) != 1 {
		t.Fatalf("a RENAME outside any sequence: %q", got)
	}
}

// TestSequenceDDLRefused: CREATE, ALTER and DROP SEQUENCE of a replicated
// name stop the task with the fix (issue 29, N11: they were ignored, and
// the sequence never reached the target); an excluded one passes.
func TestSequenceDDLRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Selected = func(r sluice.TableRef) bool { return r.Schema == "db" && r.Name != "skip" }
	cfg.SchemaSelected = func(s string) bool { return s == "db" }
	for _, q := range []string{"CREATE SEQUENCE s1 START WITH 100 INCREMENT BY 5", "ALTER SEQUENCE s1 RESTART WITH 5", "DROP SEQUENCE IF EXISTS db.s1"} {
		d, err := New(cfg, schema.NewTracker())
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Feed(queryEvent("db", q), sluice.Position{File: "f", Pos: 10})
		if err == nil || !strings.Contains(err.Error(), "sequence db.s1: sluice replicates no sequence") || !strings.Contains(err.Error(), "tables.exclude") {
			t.Errorf("%s: %v, want a stop naming the sequence and the fix", q, err)
		}
		if items, err := d.Feed(queryEvent("db", strings.Replace(q, "s1", "skip", 1)), sluice.Position{File: "f", Pos: 20}); err != nil || len(items) != 0 {
			t.Errorf("%s on an excluded sequence: %v %v", q, items, err)
		}
	}
}
