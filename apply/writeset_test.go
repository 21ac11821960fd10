package apply

import (
	"hash/maphash"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

func infoFor(t *sluice.Table, id uint64) *tableInfo {
	ti := &tableInfo{spec: sqlgen.NewTableSpec(t, t.Ref), id: id}
	if t.HasKey() {
		ti.keys = append(ti.keys, t.PK)
	}
	for _, k := range t.UniqueKeys {
		if len(t.PK) == 0 || &k[0] != &t.PK[0] {
			ti.keys = append(ti.keys, k)
		}
	}
	return ti
}

func keysOf(info *tableInfo, changes ...sluice.RowChange) map[uint64]bool {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	var ks []uint64
	for i := range changes {
		ks = addWriteset(ks, info, &changes[i], &h)
	}
	m := map[uint64]bool{}
	for _, k := range ks {
		m[k] = true
	}
	return m
}

func conflict(a, b map[uint64]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func TestWritesetConflicts(t *testing.T) {
	users := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "users"},
		Columns: []sluice.Column{{Name: "id"}, {Name: "email", Nullable: true}, {Name: "n"}},
		PK:      []int{0}, UniqueKeys: [][]int{{1}}}
	orders := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "orders"}, Columns: []sluice.Column{{Name: "id"}}, PK: []int{0}}
	logs := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: "logs"}, Columns: []sluice.Column{{Name: "a"}, {Name: "b"}}}
	u, o, l := infoFor(users, 1), infoFor(orders, 2), infoFor(logs, 3)
	ins := func(row ...any) sluice.RowChange { return sluice.RowChange{Kind: sluice.Insert, After: row} }
	upd := func(b, a []any) sluice.RowChange { return sluice.RowChange{Kind: sluice.Update, Before: b, After: a} }
	del := func(row ...any) sluice.RowChange { return sluice.RowChange{Kind: sluice.Delete, Before: row} }

	cases := []struct {
		name string
		a, b map[uint64]bool
		want bool
	}{
		{"same primary key", keysOf(u, ins(int32(1), "a@x", 0)), keysOf(u, upd([]any{int32(1), "a@x", 0}, []any{int32(1), "a@x", 5})), true},
		{"different rows", keysOf(u, ins(int32(1), "a@x", 0)), keysOf(u, ins(int32(2), "b@x", 0)), false},
		{"unique key reused after delete", keysOf(u, del(int32(1), "a@x", 0)), keysOf(u, ins(int32(2), "a@x", 0)), true},
		{"unique key, case and trailing spaces folded", keysOf(u, ins(int32(1), "A@X  ", 0)), keysOf(u, ins(int32(2), "a@x", 0)), true},
		{"NULL unique values never conflict", keysOf(u, ins(int32(1), nil, 0)), keysOf(u, ins(int32(2), nil, 0)), false},
		{"same key value in another table", keysOf(u, ins(int32(7), nil, 0)), keysOf(o, ins(int32(7))), false},
		{"primary key change conflicts with old and new", keysOf(u, upd([]any{int32(1), nil, 0}, []any{int32(9), nil, 0})), keysOf(u, ins(int32(9), nil, 0)), true},
		{"primary key change, old key", keysOf(u, upd([]any{int32(1), nil, 0}, []any{int32(9), nil, 0})), keysOf(u, del(int32(1), nil, 0)), true},
		{"keyless table: every change conflicts", keysOf(l, ins(1, 2)), keysOf(l, ins(3, 4)), true},
		{"keyless and keyed tables", keysOf(l, ins(1, 2)), keysOf(o, ins(int32(1))), false},
		{"integer widths hash alike", keysOf(o, ins(int8(5))), keysOf(o, ins(int64(5))), true},
	}
	for _, c := range cases {
		if got := conflict(c.a, c.b); got != c.want {
			t.Errorf("%s: conflict=%v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkWriteset measures the scheduler's per-row cost: the writeset of
// a sysbench-like row (primary key plus one secondary unique key).
func BenchmarkWriteset(b *testing.B) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "sbtest", Name: "sbtest1"},
		Columns: []sluice.Column{{Name: "id"}, {Name: "k"}, {Name: "c"}, {Name: "pad"}}, PK: []int{0}, UniqueKeys: [][]int{{0}, {2}}}
	info := infoFor(tb, 1)
	c := sluice.RowChange{Kind: sluice.Update,
		Before: []any{int32(42), int32(7), "68487932199-96439406143-93774651418-41631865787-96406072701", "22195207048-70116052123"},
		After:  []any{int32(42), int32(8), "68487932199-96439406143-93774651418-41631865787-96406072702", "22195207048-70116052123"}}
	var h maphash.Hash
	h.SetSeed(hashSeed)
	keys := make([]uint64, 0, 16)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		keys = addWriteset(keys[:0], info, &c, &h)
	}
}

// BenchmarkBuildSQL measures turning one update row into SQL text.
func BenchmarkBuildSQL(b *testing.B) {
	tb := &sluice.Table{Ref: sluice.TableRef{Schema: "sbtest", Name: "sbtest1"},
		Columns: []sluice.Column{{Name: "id"}, {Name: "k"}, {Name: "c"}, {Name: "pad"}}, PK: []int{0}}
	spec := sqlgen.NewTableSpec(tb, tb.Ref)
	before := []any{int32(42), int32(7), "68487932199-96439406143-93774651418-41631865787-96406072701", "22195207048-70116052123"}
	after := []any{int32(42), int32(8), "68487932199-96439406143-93774651418-41631865787-96406072702", "22195207048-70116052123"}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf, _ = spec.AppendUpdate(buf[:0], before, after)
	}
}
