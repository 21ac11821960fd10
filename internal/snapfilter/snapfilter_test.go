package snapfilter

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dumpfmt"
)

// These tests exercise the decision logic on hand-built stream items; the
// end-to-end proof against MariaDB (an interrupted --mode all under writes,
// then verify) is load's TestModeAllResumesExactly.

func key(s string) dumpfmt.Key { return dumpfmt.Key{{S: &s}} }

var (
	p1 = sluice.Position{File: "bin.000001", Pos: 1000, GTIDSet: "0-1-10"}
	p2 = sluice.Position{File: "bin.000001", Pos: 2000, GTIDSet: "0-1-20"}
)

func intTable(name string) *sluice.Table {
	return &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: name},
		Columns:     []sluice.Column{{Name: "id", DataType: "int"}, {Name: "v", DataType: "varchar"}},
		PK:          []int{0},
		PKIsPrimary: true,
		UniqueKeys:  [][]int{{0}},
	}
}

// mixed: (-inf,100] and (200,+inf) read at p1, (100,200] at p2.
func mixedFilter(t *testing.T) *Filter {
	t.Helper()
	f, err := New([]Table{
		{Name: "`s`.`m`", Created: p1, Chunks: []Chunk{{Index: 0, Hi: key("100"), Pos: p1}, {Index: 1, Lo: key("100"), Hi: key("200"), Pos: p2}, {Index: 2, Lo: key("200"), Pos: p1}}},
		// Made by the first run, reloaded whole by the second.
		{Name: "`s`.`one`", Created: p1, Chunks: []Chunk{{Index: 0, Pos: p2}}},
		// Wholly copied by the first run.
		{Name: "`s`.`old`", Created: p1, Chunks: []Chunk{{Index: 0, Pos: p1}}},
		// Created on the source between the runs, made and read by the second.
		{Name: "`s`.`fresh`", Created: p2, Chunks: []Chunk{{Index: 0, Pos: p2}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run feeds one transaction and returns the surviving changes.
func run(t *testing.T, f *Filter, gtid string, changes ...sluice.RowChange) []sluice.RowChange {
	t.Helper()
	pos := sluice.Position{File: "bin.000001", Pos: 1500}
	if _, err := f.Item(&sluice.StreamItem{Kind: sluice.ItemBegin, GTID: gtid}, pos); err != nil {
		t.Fatal(err)
	}
	it := sluice.StreamItem{Kind: sluice.ItemRows, Changes: changes}
	keep, err := f.Item(&it, pos)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Item(&sluice.StreamItem{Kind: sluice.ItemCommit}, pos); err != nil {
		t.Fatal(err)
	}
	if !keep {
		if len(it.Changes) != 0 {
			t.Fatalf("item dropped but %d changes left", len(it.Changes))
		}
		return nil
	}
	return it.Changes
}

func ins(tb *sluice.Table, id int64) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Insert, Table: tb, After: []any{id, "x"}}
}
func del(tb *sluice.Table, id int64) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Delete, Table: tb, Before: []any{id, "x"}}
}
func upd(tb *sluice.Table, from, to int64) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Update, Table: tb, Before: []any{from, "x"}, After: []any{to, "y"}}
}

func describe(cs []sluice.RowChange) string {
	var out []string
	for _, c := range cs {
		s := c.Kind.String()
		if c.Before != nil {
			s += " " + fmt.Sprint(c.Before[0])
		}
		if c.After != nil {
			s += " >" + fmt.Sprint(c.After[0])
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestBetweenSnapshotsKeyByKey(t *testing.T) {
	f := mixedFilter(t)
	m, one := intTable("m"), intTable("one")
	other := intTable("other") // not part of the copy
	got := describe(run(t, f, "0-1-15",
		ins(m, 50),       // chunk 0 read at p1: missing, apply
		ins(m, 150),      // chunk 1 read at p2: has it
		ins(m, 100),      // bound belongs to chunk 0
		ins(m, 101),      // and 101 to chunk 1
		upd(m, 50, 150),  // old key still there, new one copied: delete only
		upd(m, 150, 250), // old key gone in the copy, new one missing: insert only
		upd(m, 120, 130), // both in chunk 1: drop
		upd(m, 10, 20),   // both in chunk 0: apply
		del(m, 300),      // chunk 2 at p1: apply
		ins(one, 1),      // single-snapshot table read at p2: drop
		ins(other, 1),    // not copied: apply
	))
	want := "insert >50, insert >100, delete 50, insert >250, update 10 >20, delete 300, insert >1"
	if got != want {
		t.Fatalf("between the snapshots:\n got %s\nwant %s", got, want)
	}
	if f.Filtered() != 6 {
		t.Errorf("filtered %d changes, want 6", f.Filtered())
	}
	if got := describe(run(t, f, "0-1-5", ins(m, 50), ins(m, 150), ins(one, 1), ins(other, 2))); got != "insert >2" {
		t.Errorf("before both snapshots: got %s", got)
	}
	if got := describe(run(t, f, "0-1-25", ins(m, 50), ins(m, 150), upd(m, 50, 150), ins(one, 1))); got != "insert >50, insert >150, update 50 >150, insert >1" {
		t.Errorf("after both snapshots: got %s", got)
	}
	// Another GTID domain, unknown to the snapshots, comes after them.
	if got := describe(run(t, f, "1-1-3", ins(m, 150))); got != "insert >150" {
		t.Errorf("new domain: got %s", got)
	}
}

func TestDDLAgainstTheCopy(t *testing.T) {
	f := mixedFilter(t)
	pos := sluice.Position{File: "bin.000001", Pos: 1500}
	ref := func(n string) sluice.TableRef { return sluice.TableRef{Schema: "s", Name: n} }
	for _, c := range []struct {
		gtid   string
		source string
		tables []string
		want   string // apply, skip or refuse
	}{
		{"0-1-5", "ALTER TABLE m ADD INDEX (v)", []string{"m"}, "skip"},
		{"0-1-25", "ALTER TABLE m ADD INDEX (v)", []string{"m"}, "apply"},
		{"0-1-15", "ALTER TABLE old ADD INDEX (v)", []string{"old"}, "apply"},
		{"0-1-15", "CREATE TABLE fresh (id INT PRIMARY KEY)", []string{"fresh"}, "skip"},
		{"0-1-15", "CREATE TABLE other (id INT PRIMARY KEY)", []string{"other"}, "apply"},
		// Indexes change no row: applied to a table copied partly before
		// and partly after them, or reloaded whole after them into the
		// table made before (issue 29); a UNIQUE one is refused.
		{"0-1-15", "ALTER TABLE m ADD INDEX k_pad (v(10))", []string{"m"}, "apply"},
		{"0-1-15", "ALTER TABLE m ADD INDEX IF NOT EXISTS k (v), ALGORITHM=INPLACE, LOCK=NONE", []string{"m"}, "apply"},
		{"0-1-15", "CREATE INDEX k ON m (v)", []string{"m"}, "apply"},
		{"0-1-15", "ALTER TABLE one DROP INDEX k", []string{"one"}, "apply"},
		{"0-1-15", "DROP INDEX k ON m", []string{"m"}, "apply"},
		{"0-1-15", "ALTER TABLE m ADD UNIQUE KEY u (v)", []string{"m"}, "refuse"},
		{"0-1-15", "CREATE UNIQUE INDEX u ON m (v)", []string{"m"}, "refuse"},
		{"0-1-15", "ALTER TABLE m ADD INDEX k (v), ADD COLUMN c INT", []string{"m"}, "refuse"},
		{"0-1-15", "ALTER TABLE fresh ADD INDEX k (v)", []string{"fresh"}, "skip"},
		{"0-1-15", "TRUNCATE TABLE one", []string{"one"}, "refuse"},
		{"0-1-15", "RENAME TABLE old TO fresh", []string{"old", "fresh"}, "refuse"},
		{"0-1-15", "CREATE DATABASE x", nil, "apply"},
		{"0-1-15", "drop  database s", nil, "refuse"},
	} {
		it := sluice.StreamItem{Kind: sluice.ItemDDL, GTID: c.gtid, Source: c.source}
		for _, n := range c.tables {
			it.Tables = append(it.Tables, ref(n))
		}
		keep, err := f.Item(&it, pos)
		got := "skip"
		switch {
		case err != nil:
			got = "refuse"
			if !errors.Is(err, sluice.ErrUnsupportedDDL) || !strings.Contains(err.Error(), "fix:") {
				t.Errorf("%s at %s: refusal without the DDL sentinel or a fix: %v", c.source, c.gtid, err)
			}
		case keep:
			got = "apply"
		}
		if got != c.want {
			t.Errorf("%s at %s: %s (%v), want %s", c.source, c.gtid, got, err, c.want)
		}
	}
}

func TestFilePositionsWithoutGTID(t *testing.T) {
	a := sluice.Position{File: "bin.000002", Pos: 500}
	b := sluice.Position{File: "bin.000003", Pos: 400}
	f, err := New([]Table{{Name: "`s`.`m`", Created: a, Chunks: []Chunk{{Index: 0, Hi: key("10"), Pos: a}, {Index: 1, Lo: key("10"), Pos: b}}}})
	if err != nil {
		t.Fatal(err)
	}
	m := intTable("m")
	feed := func(at sluice.Position) string {
		f.Item(&sluice.StreamItem{Kind: sluice.ItemBegin}, at)
		it := sluice.StreamItem{Kind: sluice.ItemRows, Changes: []sluice.RowChange{ins(m, 5), ins(m, 50)}}
		if _, err := f.Item(&it, at); err != nil {
			t.Fatal(err)
		}
		f.Item(&sluice.StreamItem{Kind: sluice.ItemCommit}, at)
		return describe(it.Changes)
	}
	for _, c := range []struct {
		at   sluice.Position
		want string
	}{
		{sluice.Position{File: "bin.000002", Pos: 300}, ""},
		{sluice.Position{File: "bin.000002", Pos: 900}, "insert >5"},
		{sluice.Position{File: "bin.000003", Pos: 100}, "insert >5"},
		{sluice.Position{File: "bin.000003", Pos: 401}, "insert >5, insert >50"},
	} {
		if got := feed(c.at); got != c.want {
			t.Errorf("at %s: got %q, want %q", c.at, got, c.want)
		}
	}
}

func TestUnmatchableMixedTables(t *testing.T) {
	s := "abc"
	_, err := New([]Table{{Name: "`s`.`str`", Chunks: []Chunk{{Index: 0, Hi: dumpfmt.Key{{S: &s}}, Pos: p1}, {Index: 1, Lo: dumpfmt.Key{{S: &s}}, Pos: p2}}}})
	if err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("mixed table with a string key: %v, want a refusal", err)
	}
	// A string key is fine when every chunk has the same snapshot.
	if _, err := New([]Table{{Name: "`s`.`str`", Chunks: []Chunk{{Index: 0, Hi: dumpfmt.Key{{S: &s}}, Pos: p1}, {Index: 1, Lo: dumpfmt.Key{{S: &s}}, Pos: p1}}}}); err != nil {
		t.Errorf("single-snapshot string key: %v", err)
	}
	f := mixedFilter(t)
	uq := intTable("m")
	uq.UniqueKeys = [][]int{{0}, {1}}
	f.Item(&sluice.StreamItem{Kind: sluice.ItemBegin, GTID: "0-1-15"}, p1)
	it := sluice.StreamItem{Kind: sluice.ItemRows, Changes: []sluice.RowChange{ins(uq, 5)}}
	if _, err := f.Item(&it, p1); err == nil || !strings.Contains(err.Error(), "unique key") {
		t.Errorf("mixed table with a second unique key: %v, want a refusal", err)
	}
}

func TestParseMaria(t *testing.T) {
	for _, c := range []struct {
		in     string
		d      uint32
		n      uint64
		wantOK bool
	}{{"0-1-10", 0, 10, true}, {"3-100-18446744073709551615", 3, 1<<64 - 1, true}, {"0-1", 0, 0, false}, {"x-1-2", 0, 0, false}, {"0-1-2-3", 0, 0, false}} {
		d, n, err := parseMaria(c.in)
		if (err == nil) != c.wantOK || c.wantOK && (d != c.d || n != c.n) {
			t.Errorf("parseMaria(%q) = %d, %d, %v", c.in, d, n, err)
		}
	}
}

// TestXAPreparedBetweenSnapshots: an XA transaction's rows are in a
// chunk's copy when its XA COMMIT came before that chunk's snapshot, not
// its prepare. The prepare group's rows pass untouched (they are held until
// the commit); a commit after every snapshot applies them all, and one
// between the snapshots stops the task.
func TestXAPreparedBetweenSnapshots(t *testing.T) {
	f := mixedFilter(t)
	m := intTable("m")
	pos := sluice.Position{File: "bin.000001", Pos: 1500}
	// Prepared at 0-1-15, between the snapshots: chunk 1 (read at p2)
	// would have dropped an ordinary transaction's insert of 150.
	for _, it := range []sluice.StreamItem{{Kind: sluice.ItemBegin, GTID: "0-1-15", XID: "X'61',X'',1"}} {
		if keep, err := f.Item(&it, pos); err != nil || !keep {
			t.Fatalf("begin: %v %v", keep, err)
		}
	}
	rows := sluice.StreamItem{Kind: sluice.ItemRows, Changes: []sluice.RowChange{ins(m, 50), ins(m, 150)}}
	if keep, err := f.Item(&rows, pos); err != nil || !keep || describe(rows.Changes) != "insert >50, insert >150" {
		t.Fatalf("prepared rows: keep %v, %v, %s", keep, err, describe(rows.Changes))
	}
	if keep, err := f.Item(&sluice.StreamItem{Kind: sluice.ItemXAPrepare, GTID: "0-1-15", XID: "X'61',X'',1"}, pos); err != nil || !keep {
		t.Fatalf("prepare: %v %v", keep, err)
	}
	// Committed after both snapshots: no chunk holds the rows.
	if keep, err := f.Item(&sluice.StreamItem{Kind: sluice.ItemXACommit, GTID: "0-1-25", XID: "X'61',X'',1"}, sluice.Position{File: "bin.000001", Pos: 2500}); err != nil || !keep {
		t.Fatalf("commit after the snapshots: %v %v", keep, err)
	}
	// Committed between them: chunk 1 holds its rows, chunk 0 does not.
	_, err := f.Item(&sluice.StreamItem{Kind: sluice.ItemXACommit, GTID: "0-1-16", XID: "X'62',X'',1"}, pos)
	var se *sluice.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "X'62'") || se.Hint == "" {
		t.Fatalf("commit between the snapshots: got %v, want a refusal naming the XID", err)
	}
	// An ordinary transaction after it is filtered as before.
	if got := describe(run(t, f, "0-1-17", ins(m, 50), ins(m, 150))); got != "insert >50" {
		t.Fatalf("after the XA items: got %s", got)
	}
}
