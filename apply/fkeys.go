package apply

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// Foreign keys (issue 29, N1).
//
// MariaDB does not binlog what a foreign key's ON DELETE / ON UPDATE action
// changes in the child table: the source's binlog holds the parent's row
// change only, and a replica runs the cascade itself, with
// foreign_key_checks on (a native replica sets the variable from each rows
// event's NO_FOREIGN_KEY_CHECKS flag: RowChange.NoFKChecks). So the row
// sessions run with the checks on, and three things keep parallel apply
// exact:
//
//   - Writesets carry the referenced keys, as MySQL's WRITESET does: a
//     child row's foreign key values are hashed as the parent's key (the
//     referenced table and columns), and a parent row's referenced values
//     the same way, before and after the change. A parent and a child
//     change of one key value then conflict and run in source order on one
//     worker: a child insert never runs before its parent's insert, nor a
//     parent's delete before its child's delete.
//   - A change that makes the target cascade (a parent row deleted under a
//     CASCADE / SET NULL / SET DEFAULT action, or its referenced values
//     updated under such an ON UPDATE action) changes child rows the
//     writesets cannot name: the stream never shows which rows they were.
//     Its group is a barrier: it runs after every earlier group has
//     committed and before any later group starts (conflicts, chain.go).
//     A later re-insert of a cascaded-away child key is then ordered
//     after the cascade. (MySQL's WRITESET is coarser: it falls back to
//     commit order for every change of a table that a key references.)
//   - Tables linked by a foreign key (either side) are never compacted
//     (compact.go): compaction reorders a group's changes by kind, which
//     with the checks on could insert a child before its parent, and it
//     merges changes that a cascade needs to see one by one.
//
// The full copy keeps the checks off (load.Open sets foreign_key_checks=0
// on its sessions): it loads a consistent
// snapshot, table by table, in no parent-first order.
//
// Foreign keys that reference tables outside the replicated set act on the
// target as they do on a native replica: the referenced rows must be on the
// target (else the target refuses the child row, and the task stops naming
// it), and cascades into tables that are not replicated run on the target.
// Their writeset hashes only ever meet other changes of replicated tables.
//
// DDL runs under the source session's foreign_key_checks, which the Query
// event carries in Q_FLAGS2 (ddlrun.go, ddlSessionSQL), as on a native
// replica.

// fkRef is one foreign key as seen from one of its two tables: the
// columns of this table's rows that hold the referenced key, hashed under
// id (the referenced table and columns) with folds, each side its own
// column's. MariaDB wants the same character set on both sides; were the
// collations to fold differently, a missed conflict could only run a
// child's change before its parent's, which the target refuses (1451,
// 1452) and the task stops: cascades never depend on these hashes.
type fkRef struct {
	id    uint64
	cols  []int
	folds []*keyFold
}

// fkInfo is what the applier knows about a table's foreign keys.
type fkInfo struct {
	out []fkRef // the table's own foreign keys (it is the child)
	in  []fkRef // keys of other tables (or its own) that reference it
	// cascadeDelete: a referencing key cascades (or sets NULL or a
	// default) when a row of this table is deleted; cascadeUpdate: the
	// referenced column sets whose change cascades.
	cascadeDelete bool
	cascadeUpdate [][]int
	// unmapped: a key column the stream's table does not have; every
	// change of the table is then a barrier.
	unmapped bool
}

// linked: the table has foreign keys, or is referenced by one.
func (f *fkInfo) linked() bool {
	return f != nil && (len(f.out) > 0 || len(f.in) > 0 || f.unmapped)
}

// barrier reports whether c makes the target change rows of other tables
// (or other rows of its own) through a foreign key action.
func (f *fkInfo) barrier(c *sluice.RowChange) bool {
	if f == nil || c.NoFKChecks {
		return false // without the checks, no action runs (on the source either)
	}
	if f.unmapped {
		return true
	}
	switch c.Kind {
	case sluice.Delete:
		return f.cascadeDelete
	case sluice.Update:
		for _, cols := range f.cascadeUpdate {
			for _, ci := range cols {
				if !sqlgen.EqualValue(c.Before[ci], c.After[ci]) {
					return true
				}
			}
		}
	}
	return false
}

// fkRead is what resolve reads from the target beside the table's
// definition: its foreign keys (both directions) and its triggers.
type fkRead struct {
	out, in  []schema.ForeignKey
	triggers []schema.Trigger
	err      error
}

// fkIndex is every foreign key and trigger on the target, read in one scan
// (information_schema opens every table to list foreign keys: one scan per
// table would cost each table's first row that much), by lower-case table.
// It is read again after each DDL (ddl: Stats.DDL when it was read).
type fkIndex struct {
	ddl      uint64
	out, in  map[sluice.TableRef][]schema.ForeignKey
	triggers map[sluice.TableRef][]schema.Trigger
}

func lowerRef(r sluice.TableRef) sluice.TableRef {
	return sluice.TableRef{Schema: strings.ToLower(r.Schema), Name: strings.ToLower(r.Name)}
}

// readFKs returns ref's foreign keys and triggers. Called by resolve, one
// at a time (the scheduler's), so a.fkIdx needs no lock.
func (a *Applier) readFKs(ctx context.Context, ref sluice.TableRef) fkRead {
	a.mu.Lock()
	ddl := a.stats.DDL
	a.mu.Unlock()
	x := a.fkIdx
	if x == nil || x.ddl != ddl {
		fks, err := schema.AllForeignKeys(ctx, a.db)
		if err != nil {
			return fkRead{err: fmt.Errorf("read the target's foreign keys: %w", err)}
		}
		trs, err := schema.AllTriggers(ctx, a.db)
		if err != nil {
			return fkRead{err: fmt.Errorf("read the target's triggers: %w", err)}
		}
		x = &fkIndex{ddl: ddl, out: map[sluice.TableRef][]schema.ForeignKey{}, in: map[sluice.TableRef][]schema.ForeignKey{}, triggers: map[sluice.TableRef][]schema.Trigger{}}
		for _, fk := range fks {
			x.out[lowerRef(fk.Child)] = append(x.out[lowerRef(fk.Child)], fk)
			x.in[lowerRef(fk.Parent)] = append(x.in[lowerRef(fk.Parent)], fk)
		}
		for _, tr := range trs {
			x.triggers[lowerRef(tr.Table)] = append(x.triggers[lowerRef(tr.Table)], tr)
		}
		a.fkIdx = x
	}
	k := lowerRef(ref)
	return fkRead{out: x.out[k], in: x.in[k], triggers: x.triggers[k]}
}

// ErrTargetTriggers: a replicated target table has triggers.
var ErrTargetTriggers = errors.New("target table has triggers")

// triggersError refuses a table with triggers (issue 29, N12). A native
// replica does not fire triggers for row events (slave_run_triggers_for_rbr
// is NO by default); the applier's row statements would fire them, and the
// rows the source's own triggers wrote arrive in the stream as well, so
// the target would hold them twice.
func triggersError(ref sluice.TableRef, trs []schema.Trigger) error {
	return &sluice.Error{Op: "apply rows to " + ref.String(),
		Err:  fmt.Errorf("%w %s: they would fire for every replicated row, and the rows the source's triggers wrote arrive as rows already", ErrTargetTriggers, TriggerNames(trs)),
		Hint: "drop these triggers on the target (a MariaDB replica does not fire triggers for replicated rows), then restart the task"}
}

// TriggerNames lists triggers for a message: schema.name (BEFORE INSERT).
func TriggerNames(trs []schema.Trigger) string {
	var b strings.Builder
	for i, t := range trs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(sluice.TableRef{Schema: t.Schema, Name: t.Name}.String())
		b.WriteString(" (" + t.Timing + " " + t.Event + ")")
	}
	return b.String()
}

// buildFK turns the target's foreign keys of eff (the table as the stream
// sees it, routed to ref) into its fkInfo, nil when it has none.
func buildFK(eff *sluice.Table, ref sluice.TableRef, r fkRead, folds map[string]*keyFold) *fkInfo {
	if len(r.out) == 0 && len(r.in) == 0 {
		return nil
	}
	f := &fkInfo{}
	mapCols := func(names []string) ([]int, []*keyFold) {
		cols := make([]int, len(names))
		fs := make([]*keyFold, len(names))
		for i, n := range names {
			cols[i] = eff.ColumnIndex(n)
			if cols[i] < 0 {
				return nil, nil
			}
			fs[i] = folds[strings.ToLower(n)]
		}
		return cols, fs
	}
	for _, fk := range r.out {
		cols, fs := mapCols(fk.Columns)
		if cols == nil {
			f.unmapped = true
			continue
		}
		f.out = append(f.out, fkRef{id: fkID(fk.Parent, fk.RefColumns), cols: cols, folds: fs})
	}
	for _, fk := range r.in {
		cols, fs := mapCols(fk.RefColumns)
		if cols == nil {
			f.unmapped = true
			continue
		}
		f.in = append(f.in, fkRef{id: fkID(ref, fk.RefColumns), cols: cols, folds: fs})
		if schema.Cascades(fk.OnDelete) {
			f.cascadeDelete = true
		}
		if schema.Cascades(fk.OnUpdate) {
			f.cascadeUpdate = append(f.cascadeUpdate, cols)
		}
	}
	return f
}

// fkID seeds the hashes of one referenced key: the parent table and its
// referenced columns, as both sides name them (lower case, as MariaDB
// compares names here).
func fkID(parent sluice.TableRef, cols []string) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString("fk\x00")
	h.WriteString(strings.ToLower(parent.Schema))
	h.WriteByte(0)
	h.WriteString(strings.ToLower(parent.Name))
	for _, c := range cols {
		h.WriteByte(0)
		h.WriteString(strings.ToLower(c))
	}
	return h.Sum64()
}

// addFKWriteset appends the referenced-key hashes of c: for each foreign
// key of the table, and each key that references it, the key's values in
// the row before and after the change (a NULL part: no reference).
func addFKWriteset(keys []uint64, f *fkInfo, c *sluice.RowChange, h *maphash.Hash) []uint64 {
	if f == nil {
		return keys
	}
	for _, refs := range [2][]fkRef{f.out, f.in} {
		for i := range refs {
			r := &refs[i]
		row:
			for _, row := range [2][]any{c.Before, c.After} {
				if row == nil {
					continue
				}
				h.Reset()
				var buf [8]byte
				binary.LittleEndian.PutUint64(buf[:], r.id)
				h.Write(buf[:])
				for p, ci := range r.cols {
					if ci >= len(row) || row[ci] == nil {
						continue row
					}
					hashValue(h, row[ci], r.folds[p])
				}
				keys = append(keys, h.Sum64())
			}
		}
	}
	return keys
}
