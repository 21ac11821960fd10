package apply

import (
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

func TestCompactor(t *testing.T) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "t"}, Columns: []sluice.Column{{Name: "id"}, {Name: "v"}}, PK: []int{0}}
	info := &tableInfo{spec: sqlgen.NewTableSpec(tb, tb.Ref), keys: [][]int{{0}}, id: 1}
	lookup := func(*sluice.Table) *tableInfo { return info }
	ins := func(id int32, v string) sluice.RowChange {
		return sluice.RowChange{Kind: sluice.Insert, Table: tb, After: []any{id, v}}
	}
	del := func(id int32, v string) sluice.RowChange {
		return sluice.RowChange{Kind: sluice.Delete, Table: tb, Before: []any{id, v}}
	}
	upd := func(id0 int32, v0 string, id1 int32, v1 string) sluice.RowChange {
		return sluice.RowChange{Kind: sluice.Update, Table: tb, Before: []any{id0, v0}, After: []any{id1, v1}}
	}
	type net struct {
		existed bool
		after   any // nil: deleted; else the final v
	}
	cases := []struct {
		name    string
		changes []sluice.RowChange
		ok      bool
		want    map[int32]net // by the row's key in before (existed) or after
	}{
		{"delete then insert is an update", []sluice.RowChange{del(1, "a"), ins(1, "b")}, true, map[int32]net{1: {true, "b"}}},
		{"insert then delete is nothing", []sluice.RowChange{ins(2, "a"), del(2, "a")}, true, map[int32]net{2: {false, nil}}},
		{"updates fold", []sluice.RowChange{upd(3, "a", 3, "b"), upd(3, "b", 3, "c")}, true, map[int32]net{3: {true, "c"}}},
		{"key change splits", []sluice.RowChange{upd(4, "a", 5, "a")}, true, map[int32]net{4: {true, nil}, 5: {false, "a"}}},
		{"insert of a present row", []sluice.RowChange{ins(6, "a"), ins(6, "b")}, false, nil},
		{"update of a deleted row", []sluice.RowChange{del(7, "a"), upd(7, "a", 7, "b")}, false, nil},
	}
	var c compactor
	for _, tc := range cases {
		u := &unit{txns: []*txn{{changes: tc.changes}}}
		if got := c.build(u, lookup); got != tc.ok {
			t.Errorf("%s: build=%v, want %v", tc.name, got, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if len(c.order) != len(tc.want) {
			t.Errorf("%s: %d net rows, want %d", tc.name, len(c.order), len(tc.want))
		}
		for _, r := range c.order {
			img := r.after
			if r.existed {
				img = r.before
			}
			if img == nil {
				// Inserted and deleted again: no image is kept.
				found := false
				for _, w := range tc.want {
					found = found || (!w.existed && w.after == nil)
				}
				if !found || r.existed {
					t.Errorf("%s: unexpected vanished row", tc.name)
				}
				continue
			}
			id := img[0].(int32)
			w, ok := tc.want[id]
			if !ok {
				t.Errorf("%s: unexpected net row %v", tc.name, id)
				continue
			}
			var after any
			if r.after != nil {
				after = r.after[1]
			}
			if r.existed != w.existed || after != w.after {
				t.Errorf("%s: row %d existed=%v after=%v, want %v %v", tc.name, id, r.existed, after, w.existed, w.after)
			}
		}
	}
}

// TestInsertMerging checks the SQL a group becomes: consecutive INSERTs into
// one table merge into one multi-row statement; anything in between ends it.
func TestInsertMerging(t *testing.T) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "t"}, Columns: []sluice.Column{{Name: "id"}}, PK: []int{0}}
	tb2 := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "u"}, Columns: []sluice.Column{{Name: "id"}}, PK: []int{0}}
	i1 := &tableInfo{spec: sqlgen.NewTableSpec(tb, tb.Ref), keys: [][]int{{0}}, id: 1}
	i2 := &tableInfo{spec: sqlgen.NewTableSpec(tb2, tb2.Ref), keys: [][]int{{0}}, id: 2}
	a := &Applier{cfg: DefaultConfig()}
	b := &batchWriter{a: a}
	for _, c := range []struct {
		info *tableInfo
		ch   sluice.RowChange
	}{
		{i1, sluice.RowChange{Kind: sluice.Insert, After: []any{1}}},
		{i1, sluice.RowChange{Kind: sluice.Insert, After: []any{2}}},
		{i2, sluice.RowChange{Kind: sluice.Insert, After: []any{3}}},
		{i2, sluice.RowChange{Kind: sluice.Insert, After: []any{4}}},
		{i2, sluice.RowChange{Kind: sluice.Delete, Before: []any{4}}},
		{i2, sluice.RowChange{Kind: sluice.Insert, After: []any{5}}},
	} {
		if err := b.change(t.Context(), &c.ch, c.info); err != nil {
			t.Fatal(err)
		}
	}
	want := "INSERT INTO `s`.`t` (`id`) VALUES (1),(2);INSERT INTO `s`.`u` (`id`) VALUES (3),(4);DELETE FROM `s`.`u` WHERE `id`=4;INSERT INTO `s`.`u` (`id`) VALUES (5)"
	if got := string(b.buf); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestCompactorKeysAreExactBytes: string keys that differ only by ASCII
// case, a trailing space or a trailing 0x00 are different rows to a _bin,
// binary or NO PAD key, so compaction must keep their changes apart (the
// difftest found UPDATEs of 'A' and 'a' merged into one row).
func TestCompactorKeysAreExactBytes(t *testing.T) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "t"}, Columns: []sluice.Column{{Name: "k"}, {Name: "v"}}, PK: []int{0}}
	info := &tableInfo{spec: sqlgen.NewTableSpec(tb, tb.Ref), keys: [][]int{{0}}, id: 1}
	lookup := func(*sluice.Table) *tableInfo { return info }
	for _, pair := range [][2]any{{"A", "a"}, {"ab", "ab "}, {[]byte("x"), []byte("x\x00")}, {"a\x00b", "a"}, {"1:a", "1"}} {
		upd := func(k any, v int32) sluice.RowChange {
			return sluice.RowChange{Kind: sluice.Update, Table: tb, Before: []any{k, v}, After: []any{k, v + 1}}
		}
		var c compactor
		u := &unit{txns: []*txn{{changes: []sluice.RowChange{upd(pair[0], 1), upd(pair[1], 1)}}}}
		if !c.build(u, lookup) {
			t.Errorf("%q/%q: build refused", pair[0], pair[1])
			continue
		}
		if len(c.order) != 2 {
			t.Errorf("keys %q and %q: %d net rows, want 2", pair[0], pair[1], len(c.order))
		}
	}
}
