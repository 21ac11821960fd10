package apply

import (
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// Compaction: inside one target transaction only the net effect per row is
// visible, so for tables whose only unique key is the primary key the
// changes of a whole group can be reduced to one statement per row and
// reordered: all DELETEs first (batched), then UPDATEs, then INSERTs
// (multi-row). Rows of such a table are distinct by primary key, so these
// statements cannot collide; tables are independent because foreign keys
// are not checked while applying. A delete followed by an insert of the
// same key (sysbench's write-only pattern) becomes a single UPDATE.
//
// Anything unexpected (an insert of a row already present, a change of a
// row already deleted) abandons compaction for the group, which is then
// applied statement by statement in source order.

// netRow is the net change of one row within a group.
type netRow struct {
	info    *tableInfo
	existed bool  // the row existed before the group
	before  []any // its image before the group (existed)
	after   []any // its image after the group; nil: deleted
	order   int
	// src is the source transaction of its first change in the group: an
	// UPDATE or DELETE there is what says the row existed (for messages).
	src *txn
}

type compactor struct {
	rows     map[string]*netRow
	order    []*netRow
	other    []*sluice.RowChange // changes of tables that cannot be compacted, in order
	infos    []*tableInfo        // per change of other
	otherSrc []*txn              // per change of other: its source transaction
	cur      *txn                // the transaction build is reading
	key      []byte
}

func (c *compactor) reset() {
	if c.rows == nil {
		c.rows = map[string]*netRow{}
	}
	clear(c.rows)
	c.order = c.order[:0]
	c.other = c.other[:0]
	c.infos = c.infos[:0]
	c.otherSrc = c.otherSrc[:0]
}

// compactable: a primary key and no other unique key.
func compactable(info *tableInfo) bool {
	return !info.spec.Keyless && len(info.keys) == 1 && len(info.spec.Key) == len(info.keys[0])
}

// rowKey identifies a row: table and primary key values, by their exact
// bytes. Row images carry the bytes the source stored, so every change of
// one row shows the same key bytes until an UPDATE changes them, and that
// UPDATE is split into the old row going and the new one coming. Folding
// case or trailing spaces here (as writesets may) would merge two rows that
// a _bin, binary or NO PAD key keeps apart, and the merged changes would
// land on the wrong row without any anomaly to abandon compaction.
func (c *compactor) rowKey(info *tableInfo, row []any) string {
	b := strconv.AppendUint(c.key[:0], info.id, 16)
	for _, ci := range info.spec.Key {
		switch v := row[ci].(type) {
		case string:
			b = appendLenBytes(b, 's', v)
		case []byte:
			b = appendLenBytes(b, 's', string(v))
		default:
			// A SQL literal is a deterministic, per-type unique encoding;
			// key columns are never NULL.
			b = append(b, 'v')
			b = sqlgen.AppendValue(b, v)
			b = append(b, 0)
		}
	}
	c.key = b
	return string(b)
}

// appendLenBytes appends a tag, the length and the bytes of s, so that no
// byte inside a value can be read as a separator.
func appendLenBytes(b []byte, tag byte, s string) []byte {
	b = append(b, tag)
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// build computes the net changes of a group; false means apply it as is.
func (c *compactor) build(u *unit, info func(*sluice.Table) *tableInfo) bool {
	c.reset()
	for _, t := range u.txns {
		c.cur = t
		for i := range t.changes {
			ch := &t.changes[i]
			ti := info(ch.Table)
			if !compactable(ti) {
				c.other = append(c.other, ch)
				c.infos = append(c.infos, ti)
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
					// A primary key change is the old row going and a new one coming.
					if !c.remove(ti, ch.Before) || !c.insert(ti, ch.After) {
						return false
					}
					continue
				}
				r := c.rows[kb]
				switch {
				case r != nil && r.info != ti:
					return false // two tables' keys collided: apply as is
				case r == nil:
					r = &netRow{info: ti, existed: true, before: ch.Before, after: ch.After, order: len(c.order), src: t}
					c.rows[kb] = r
					c.order = append(c.order, r)
				case r.after == nil:
					return false // update of a deleted row
				default:
					r.after = ch.After
				}
			}
		}
	}
	return true
}

func (c *compactor) insert(ti *tableInfo, after []any) bool {
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
		return false // insert of a row that exists
	default:
		r.after = after
	}
	return true
}

func (c *compactor) remove(ti *tableInfo, before []any) bool {
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
		return false // delete of a deleted row
	default:
		r.after = nil
	}
	return true
}
