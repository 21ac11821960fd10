package apply

import (
	"fmt"
	"hash/maphash"
	"math/rand"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sqlgen"
)

// TestCompactorReuseMatchesFresh: one compactor, reused for thousands of
// seeded random groups (as a worker reuses its own), computes for each
// group the same net rows, in the same order, with the same images and
// source transactions, as the compactor before the reuse (refCompactor
// below, kept verbatim: a fresh string-keyed map and netRow per row), and
// the same when every key's hash collides. The groups mix two tables with
// an integer key, one with a string key (keys that are prefixes of each
// other, and equal bytes as string and []byte), and a table that cannot be
// compacted; keys repeat so rows are inserted, deleted, updated and moved.
func TestCompactorReuseMatchesFresh(t *testing.T) {
	seed := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seed))
	mk := func(name string, id uint64, uniq bool) (*sluice.Table, *tableInfo) {
		tb := &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: name}, Columns: []sluice.Column{{Name: "id"}, {Name: "v"}}, PK: []int{0}}
		info := &tableInfo{spec: sqlgen.NewTableSpec(tb, tb.Ref), keys: [][]int{{0}}, id: id}
		if uniq {
			info.keys = append(info.keys, []int{1}) // a second unique key: not compactable
		}
		return tb, info
	}
	tbA, infoA := mk("a", 1, false)
	tbB, infoB := mk("b", 2, false)
	tbS, infoS := mk("str", 3, false)
	tbU, infoU := mk("u", 4, true)
	infos := map[*sluice.Table]*tableInfo{tbA: infoA, tbB: infoB, tbS: infoS, tbU: infoU}
	lookup := func(tb *sluice.Table) *tableInfo { return infos[tb] }
	tables := []*sluice.Table{tbA, tbB, tbS, tbU}
	key := func(tb *sluice.Table) any {
		n := r.Intn(12)
		if tb != tbS {
			return int64(n)
		}
		s := []string{"", "a", "aa", "a\x00", "1", "11"}[n%6]
		if n >= 6 {
			return []byte(s)
		}
		return s
	}
	row := func(tb *sluice.Table) []any { return []any{key(tb), fmt.Sprint(r.Intn(1000))} }

	reused := &compactor{}
	colliding := &compactor{hash: func(maphash.Seed, []byte) uint64 { return 7 }}
	compacted := 0
	for g := 0; g < 3000; g++ {
		u := &unit{}
		for tx := 0; tx < 1+r.Intn(5); tx++ {
			t := &txn{gtid: fmt.Sprintf("0-1-%d", g*10+tx)}
			for c := 0; c < 1+r.Intn(6); c++ {
				tb := tables[r.Intn(len(tables))]
				ch := sluice.RowChange{Table: tb}
				switch r.Intn(3) {
				case 0:
					ch.Kind, ch.After = sluice.Insert, row(tb)
				case 1:
					ch.Kind, ch.Before = sluice.Delete, row(tb)
				default:
					ch.Kind, ch.Before, ch.After = sluice.Update, row(tb), row(tb)
					if r.Intn(2) == 0 {
						ch.After[0] = ch.Before[0] // the key stays
					}
				}
				t.changes = append(t.changes, ch)
			}
			u.txns = append(u.txns, t)
		}
		var ref refCompactor
		want := ref.build(u, lookup)
		wantNet := describe(ref.order, ref.other, ref.otherSrc)
		for _, c := range []*compactor{reused, colliding, {}} {
			if got := c.build(u, lookup); got != want {
				t.Fatalf("seed %d, group %d: build=%v, the reference %v", seed, g, got, want)
			}
			if !want {
				continue
			}
			if got := describe(c.order, c.other, c.otherSrc); got != wantNet {
				t.Fatalf("seed %d, group %d: net rows\n%s\nthe reference's\n%s", seed, g, got, wantNet)
			}
		}
		if want {
			compacted++
		}
	}
	if compacted < 500 || reused.used == 0 {
		t.Fatalf("only %d of 3000 groups compacted: the test does not reach the reused path", compacted)
	}
}

// describe prints net rows and the other changes with their identities.
func describe(order []*netRow, other []*sluice.RowChange, otherSrc []*txn) string {
	s := ""
	for i, r := range order {
		s += fmt.Sprintf("%d: %s existed=%v before=%#v after=%#v src=%s order=%d\n", i, r.info.spec.Name, r.existed, r.before, r.after, r.src.gtid, r.order)
	}
	for i, c := range other {
		s += fmt.Sprintf("other %d: %p %s\n", i, c, otherSrc[i].gtid)
	}
	return s
}

// refCompactor is the compactor as it was before it reused its memory
// (commit e37a079), the reference for TestCompactorReuseMatchesFresh.
type refCompactor struct {
	rows     map[string]*netRow
	order    []*netRow
	other    []*sluice.RowChange
	otherSrc []*txn
	cur      *txn
}

func (c *refCompactor) rowKey(info *tableInfo, row []any) string {
	return string(rowKey(nil, info, row))
}

func (c *refCompactor) build(u *unit, info func(*sluice.Table) *tableInfo) bool {
	c.rows = map[string]*netRow{}
	for _, t := range u.txns {
		c.cur = t
		for i := range t.changes {
			ch := &t.changes[i]
			ti := info(ch.Table)
			if !compactable(ti) {
				c.other = append(c.other, ch)
				c.otherSrc = append(c.otherSrc, t)
				continue
			}
			switch ch.Kind {
			case sluice.Insert:
				if !c.insert(ti, ch.After) {
					return false
				}
			case sluice.Delete:
				if !c.remove(ti, ch.Before) {
					return false
				}
			case sluice.Update:
				kb, ka := c.rowKey(ti, ch.Before), c.rowKey(ti, ch.After)
				if kb != ka {
					if !c.remove(ti, ch.Before) || !c.insert(ti, ch.After) {
						return false
					}
					continue
				}
				r := c.rows[kb]
				switch {
				case r != nil && r.info != ti:
					return false
				case r == nil:
					r = &netRow{info: ti, existed: true, before: ch.Before, after: ch.After, order: len(c.order), src: t}
					c.rows[kb] = r
					c.order = append(c.order, r)
				case r.after == nil:
					return false
				default:
					r.after = ch.After
				}
			}
		}
	}
	return true
}

func (c *refCompactor) insert(ti *tableInfo, after []any) bool {
	k := c.rowKey(ti, after)
	r := c.rows[k]
	switch {
	case r != nil && r.info != ti:
		return false
	case r == nil:
		r = &netRow{info: ti, after: after, order: len(c.order), src: c.cur}
		c.rows[k] = r
		c.order = append(c.order, r)
	case r.after != nil:
		return false
	default:
		r.after = after
	}
	return true
}

func (c *refCompactor) remove(ti *tableInfo, before []any) bool {
	k := c.rowKey(ti, before)
	r := c.rows[k]
	switch {
	case r != nil && r.info != ti:
		return false
	case r == nil:
		r = &netRow{info: ti, existed: true, before: before, order: len(c.order), src: c.cur}
		c.rows[k] = r
		c.order = append(c.order, r)
	case r.after == nil:
		return false
	default:
		r.after = nil
	}
	return true
}
