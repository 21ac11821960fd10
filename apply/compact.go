package apply

import (
	"bytes"
	"hash/maphash"
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// Compaction: inside one target transaction only the net effect per row is
// visible, so for tables whose only unique key is the primary key the
// changes of a whole group can be reduced to one statement per row and
// reordered: all DELETEs first (batched), then UPDATEs, then INSERTs
// (multi-row). Rows of such a table are distinct by primary key, so these
// statements cannot collide; tables are independent because a table that
// a foreign key links to another (either side) is never compacted: its
// changes stay in source order, where the checks and cascades see them as
// the source did (fkeys.go). A delete followed by an insert of the
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
	// key locates the row's key (rowKey) in compactor.keys; next chains
	// the rows whose keys hash alike.
	keyOff, keyLen int
	next           *netRow
}

// The compactor is reused by its worker for every group, and keeps what it
// allocated (issue 18: a string and a netRow per changed row were a tenth
// of the catch-up's allocations): the rows' keys go into one byte arena,
// found by their hash, and the netRows come from chunks. Ownership: all of
// it belongs to the group being built and written; reset, at the next
// build, is the only place that recycles it, and nothing keeps a *netRow
// or a key past statements() (a rowStmt keeps the row images and source
// transactions a netRow points to, never the netRow).
type compactor struct {
	rows      map[uint64]*netRow // by the hash of the row's key, chained by next
	order     []*netRow
	other     []*sluice.RowChange // changes of tables that cannot be compacted, in order
	infos     []*tableInfo        // per change of other
	otherSrc  []*txn              // per change of other: its source transaction
	cur       *txn                // the transaction build is reading
	key, key2 []byte              // scratch for rowKey
	keys      []byte              // every netRow's key
	chunks    [][]netRow          // netRows, handed out in order
	used      int                 // netRows handed out since reset
	seed      maphash.Seed
	// hash is maphash.Bytes with seed; a test makes every key collide.
	hash func(maphash.Seed, []byte) uint64
}

const netRowChunk = 64

func (c *compactor) reset() {
	if c.rows == nil {
		c.rows = map[uint64]*netRow{}
		c.seed = maphash.MakeSeed()
		if c.hash == nil {
			c.hash = maphash.Bytes
		}
	}
	clear(c.rows)
	// Drop the row images the recycled netRows point to, so they do not
	// stay alive until the slot is handed out again.
	for i := 0; i < c.used; i += netRowChunk {
		ch := c.chunks[i/netRowChunk]
		clear(ch[:min(netRowChunk, c.used-i)])
	}
	c.used = 0
	c.keys = c.keys[:0]
	clear(c.order)
	c.order = c.order[:0]
	clear(c.other)
	c.other = c.other[:0]
	c.infos = c.infos[:0]
	clear(c.otherSrc)
	c.otherSrc = c.otherSrc[:0]
}

// lookup finds the net row of key.
func (c *compactor) lookup(h uint64, key []byte) *netRow {
	for r := c.rows[h]; r != nil; r = r.next {
		if bytes.Equal(c.keys[r.keyOff:r.keyOff+r.keyLen], key) {
			return r
		}
	}
	return nil
}

// add records a new net row under key, at the end of the order.
func (c *compactor) add(h uint64, key []byte, r netRow) {
	if c.used/netRowChunk == len(c.chunks) {
		c.chunks = append(c.chunks, make([]netRow, netRowChunk))
	}
	p := &c.chunks[c.used/netRowChunk][c.used%netRowChunk]
	c.used++
	*p = r
	p.order, p.keyOff, p.keyLen, p.next = len(c.order), len(c.keys), len(key), c.rows[h]
	c.keys = append(c.keys, key...)
	c.rows[h] = p
	c.order = append(c.order, p)
}

// compactable: a primary key and no other unique key, and no foreign key
// either way.
func compactable(info *tableInfo) bool {
	return !info.spec.Keyless && len(info.keys) == 1 && len(info.spec.Key) == len(info.keys[0]) && !info.fk.linked()
}

// rowKey appends to b what identifies a row: table and primary key values,
// by their exact bytes. Row images carry the bytes the source stored, so
// every change of one row shows the same key bytes until an UPDATE changes
// them, and that UPDATE is split into the old row going and the new one
// coming. Folding case or trailing spaces here (as writesets may) would
// merge two rows that a _bin, binary or NO PAD key keeps apart, and the
// merged changes would land on the wrong row without any anomaly to
// abandon compaction.
func rowKey(b []byte, info *tableInfo, row []any) []byte {
	b = strconv.AppendUint(b, info.id, 16)
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
	return b
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
				c.key, c.key2 = rowKey(c.key[:0], ti, ch.Before), rowKey(c.key2[:0], ti, ch.After)
				if !bytes.Equal(c.key, c.key2) {
					// A primary key change is the old row going and a new one coming.
					if !c.remove(ti, ch.Before) || !c.insert(ti, ch.After) {
						return false
					}
					continue
				}
				h := c.hash(c.seed, c.key)
				r := c.lookup(h, c.key)
				switch {
				case r != nil && r.info != ti:
					return false // two tables' keys collided: apply as is
				case r == nil:
					c.add(h, c.key, netRow{info: ti, existed: true, before: ch.Before, after: ch.After, src: t})
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
	c.key = rowKey(c.key[:0], ti, after)
	h := c.hash(c.seed, c.key)
	r := c.lookup(h, c.key)
	switch {
	case r != nil && r.info != ti:
		return false
	case r == nil:
		c.add(h, c.key, netRow{info: ti, after: after, src: c.cur})
	case r.after != nil:
		return false // insert of a row that exists
	default:
		r.after = after
	}
	return true
}

func (c *compactor) remove(ti *tableInfo, before []any) bool {
	c.key = rowKey(c.key[:0], ti, before)
	h := c.hash(c.seed, c.key)
	r := c.lookup(h, c.key)
	switch {
	case r != nil && r.info != ti:
		return false
	case r == nil:
		c.add(h, c.key, netRow{info: ti, existed: true, before: before, src: c.cur})
	case r.after == nil:
		return false // delete of a deleted row
	default:
		r.after = nil
	}
	return true
}
