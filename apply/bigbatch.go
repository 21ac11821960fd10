package apply

import (
	"bytes"
	"context"
	"hash/maphash"

	"github.com/sluice-db/sluice"
)

// Multi-row statements in a streamed transaction (issue 34).
//
// A streamed transaction (serial.go) used to send one UPDATE or DELETE per
// row, each followed by its check: a 500k-row UPDATE was a million
// statements for the target to parse, 20x slower than a native replica.
// Here a run of consecutive changes of one kind to one table becomes one
// statement of up to bigRun rows, the same statements the compacted groups
// use (worker.statements): DELETE ... WHERE pk IN (...) and UPDATE of a
// derived table of the new values joined on the primary key, each checked
// to have matched exactly as many rows as it names (batch.go), so a missing
// row still stops the task as a MariaDB replica stops on error 1032.
//
// Source order is kept: a run is written where its first change stood,
// and any other change ends it first. Within one statement the server
// changes the rows in its own order, which is the same as the source's
// only where the order cannot matter:
//   - the table's one unique key is its primary key (compactable): no
//     other unique index can see two rows of one statement swap values;
//   - no foreign key refers to it or from it (compactable): no check or
//     cascade sees a half-changed statement, and the FK checks flag of
//     the source's rows event is the same for the whole run;
//   - the rows of one run are distinct by their exact key bytes (rowKey);
//     a row changed twice ends the run before its second change;
//   - an UPDATE keeps its primary key (a key change is written alone);
//   - UPDATE runs only where the compacted path joins (joinable: integer
//     keys, something besides the key to set, no generated columns); a
//     DELETE needs a single-column key; anything else is one statement
//     per row as before.
//
// Keyless tables, tables of engines without transactions and rows with
// generated columns to check keep the statement per row.

// bigRun is the most rows in one statement, and bigRunBytes about the
// most row data (estimated as changeBytes does), so that a statement of
// wide rows stays well under max_allowed_packet. A thousand rows cost the
// server about a fifth less CPU per row than 200 (issue 34). A primary
// key's IN list is a range of single-row points whatever its length (a
// unique index needs no index dives), and the UPDATE's derived table
// comes first in a STRAIGHT_JOIN (sqlgen), so neither turns into a scan.
const (
	bigRun      = 1000
	bigRunBytes = maxInsertStmt
)

// runBatch is the run of changes being gathered.
type runBatch struct {
	info    *tableInfo
	kind    sluice.ChangeKind
	noFK    bool
	bytes   int
	befores [][]any
	afters  [][]any
	// keys holds the rows' exact keys (rowKey) back to back, found by
	// hash in seen, so that a row changed twice ends the run.
	keys []byte
	seen map[uint64][]int // hash -> offsets of keys starting there (end: next offset or len)
	offs []int
	key  []byte
	seed maphash.Seed
}

// batchable reports whether change c of a table with info may join a run;
// when it may, scratch holds the row's exact key (rowKey of its before
// image).
func batchable(c *sluice.RowChange, info *tableInfo, scratch []byte) (bool, []byte) {
	if info.nontx || !compactable(info) {
		return false, scratch
	}
	switch c.Kind {
	case sluice.Delete:
		if len(info.spec.Key) != 1 || c.Before[info.spec.Key[0]] == nil {
			return false, scratch
		}
		return true, rowKey(scratch[:0], info, c.Before)
	case sluice.Update:
		if len(info.spec.Write) <= len(info.spec.Key) || info.spec.HasGenerated() {
			return false, scratch
		}
		for _, k := range info.spec.Key {
			switch c.Before[k].(type) {
			case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
			default:
				return false, scratch
			}
		}
		// A primary key change is written alone.
		scratch = rowKey(scratch[:0], info, c.Before)
		n := len(scratch)
		scratch = rowKey(scratch, info, c.After)
		return bytes.Equal(scratch[:n], scratch[n:]), scratch[:n]
	}
	return false, scratch
}

func (r *runBatch) reset() {
	clear(r.befores)
	clear(r.afters)
	r.befores, r.afters = r.befores[:0], r.afters[:0]
	r.info, r.bytes = nil, 0
	r.keys, r.offs = r.keys[:0], r.offs[:0]
	clear(r.seen)
}

// has reports whether the run holds the row with key k.
func (r *runBatch) has(h uint64, k []byte) bool {
	for _, i := range r.seen[h] {
		end := len(r.keys)
		if i+1 < len(r.offs) {
			end = r.offs[i+1]
		}
		if bytes.Equal(r.keys[r.offs[i]:end], k) {
			return true
		}
	}
	return false
}

// bigChange writes change c of the streamed transaction: into the run
// when it can join one, else (after the run) as a statement of its own.
func (b *bigTxn) bigChange(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	r := &b.run
	var ok bool
	ok, r.key = batchable(c, info, r.key)
	if !ok {
		if err := b.endRun(ctx); err != nil {
			return err
		}
		return b.bw.change(ctx, c, info)
	}
	if r.seen == nil {
		r.seen = map[uint64][]int{}
		r.seed = maphash.MakeSeed()
	}
	h := maphash.Bytes(r.seed, r.key)
	if r.info != nil && (r.info != info || r.kind != c.Kind || r.noFK != c.NoFKChecks || r.has(h, r.key)) {
		if err := b.endRun(ctx); err != nil {
			return err
		}
	}
	if r.info == nil {
		r.info, r.kind, r.noFK = info, c.Kind, c.NoFKChecks
	}
	r.seen[h] = append(r.seen[h], len(r.offs))
	r.offs = append(r.offs, len(r.keys))
	r.keys = append(r.keys, r.key...)
	r.befores = append(r.befores, c.Before)
	if c.Kind == sluice.Update {
		r.afters = append(r.afters, c.After)
	}
	r.bytes += changeBytes(c)
	if len(r.befores) >= bigRun || r.bytes >= bigRunBytes {
		return b.endRun(ctx)
	}
	return nil
}

// endRun writes the run gathered so far as one statement.
func (b *bigTxn) endRun(ctx context.Context) error {
	r := &b.run
	if r.info == nil {
		return nil
	}
	bw, info, n := &b.bw, r.info, len(r.befores)
	bw.fkFor(r.noFK)
	// The statement keeps its rows (the before images) for the message of
	// a failed check; the run's slices are reused, so it gets copies.
	st := rowStmt{info: info, kind: r.kind, want: n, rows: append([][]any(nil), r.befores...), srcs: make([]*txn, n)}
	bw.begin(st)
	if r.kind == sluice.Delete {
		bw.buf = info.spec.AppendDeleteIn(bw.buf, r.befores...)
	} else {
		bw.buf = b.a.appendUpdateJoin(bw.buf, info, r.befores, r.afters)
	}
	bw.check()
	r.reset()
	return bw.flushIfFull(ctx)
}
