package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// Foreign-key groups across a resumed copy (--mode all).
//
// A resumed run reads what is left from a new snapshot, and replication
// starts at the first one, skipping each chunk's changes up to the
// snapshot the chunk was read at (internal/snapfilter). That is exact for
// a table on its own, but not for tables joined by a foreign key: the
// source does not binlog the changes a cascade makes, so the target's
// applier (foreign_key_checks on, as a native replica) makes them itself
// when it applies the parent's change. With the parent read at one
// snapshot and the child at the other, a change made between the two is
// cascaded twice or not at all: a parent DELETE applied to the older
// parent cascades onto child rows of the newer snapshot (rows inserted
// after it, under a re-inserted parent, are lost, and a RESTRICT child
// stops the task with 1451), and a parent DELETE skipped for the newer
// parent leaves the older child's rows that the source cascaded away
// (difftest fixed seed 6). The same holds for a table whose foreign key
// references itself, chunk against chunk.
//
// So every connected group of selected tables (foreign keys in either
// direction) is one unit of the copy: when this run loads any chunk of a
// group from its snapshot, each table of the group holding chunks of an
// earlier snapshot is emptied and loaded whole from this one (the same
// reset as Config.ReloadMixed's, see resetTable), and the whole group is
// then of one snapshot. Only tables of the task are touched: the group is
// built from the specs Prepare gets. The load sessions run with
// foreign_key_checks=0 (Open), so the TRUNCATE of a referenced parent and
// the load of a child before its parent go through, as in mariadb-dump's
// output.

// GroupReload is a foreign-key group of which Prepare emptied some tables
// to load them whole from this run's snapshot with the rest (target
// names, each list in the order of the specs).
type GroupReload struct {
	// Group is every table of the group.
	Group []sluice.TableRef
	// Pending are the tables with chunks this run had to load anyway.
	Pending []sluice.TableRef
	// Reloaded are the tables emptied: they held chunks of an earlier
	// snapshot.
	Reloaded []sluice.TableRef
}

// GroupReloaded lists the foreign-key groups Prepare reloads (see
// GroupReload).
func (l *Loader) GroupReloaded() []GroupReload { return l.groupReloaded }

// fkGroups returns the connected groups of specs over their Links and
// over extra (pairs of indexes into specs), as indexes into specs, each
// group sorted: groups of two tables or more, and single tables that link
// to themselves. Links to tables outside specs count for nothing: those
// tables are not the task's.
func fkGroups(specs []TableSpec, extra [][2]int) [][]int {
	idx := make(map[sluice.TableRef]int, len(specs))
	for i, s := range specs {
		idx[s.Table.Ref] = i
	}
	parent := make([]int, len(specs))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	self := make([]bool, len(specs))
	join := func(i, j int) {
		if j == i {
			self[i] = true
		} else if a, b := find(i), find(j); a != b {
			parent[a] = b
		}
	}
	for i, s := range specs {
		for _, r := range s.Links {
			if j, ok := idx[r]; ok {
				join(i, j)
			}
		}
	}
	for _, p := range extra {
		join(p[0], p[1])
	}
	members := map[int][]int{}
	for i := range specs {
		root := find(i)
		members[root] = append(members[root], i)
	}
	var out [][]int
	for _, m := range members {
		if len(m) > 1 || self[m[0]] {
			sort.Ints(m)
			out = append(out, m)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// resetFKGroups empties, for every foreign-key group of specs of which this
// run loads a chunk, the group's tables that hold chunks of an earlier
// snapshot (see the comment at the top of this file). It runs in Prepare
// before the tables are looked at one by one, which then see these tables
// as not started.
func (l *Loader) resetFKGroups(ctx context.Context, specs []TableSpec) error {
	if !l.cfg.ReloadMixed || len(l.done) == 0 {
		return nil // not resumed: one snapshot
	}
	extra, err := l.targetLinks(ctx, specs)
	if err != nil {
		return fmt.Errorf("load: read the target's foreign keys: %w", l.classify(err))
	}
	groups := fkGroups(specs, extra)
	if len(groups) == 0 {
		return nil
	}
	keyOf := func(i int) string { return tblKey(l.cfg.Route(specs[i].Table.Ref)) }
	// Only a group with chunks both done before and to load now can mix
	// snapshots; finding none spares reading the snapshots.
	type state struct{ done, pending bool }
	states := make([]state, len(specs))
	mixed := false
	for _, g := range groups {
		var done, pending bool
		for _, i := range g {
			for _, c := range specs[i].Plan {
				if l.done[chunkKey{keyOf(i), c.Index}] {
					states[i].done = true
				} else {
					states[i].pending = true
				}
			}
			done, pending = done || states[i].done, pending || states[i].pending
		}
		mixed = mixed || done && pending
	}
	if !mixed {
		return nil
	}
	var now sluice.Position
	if err := json.Unmarshal([]byte(l.snap), &now); err != nil {
		return err
	}
	older, err := l.olderChunks(ctx, now)
	if err != nil {
		return fmt.Errorf("load: read the snapshots of the copied chunks: %w", l.classify(err))
	}
	for _, g := range groups {
		var why, reset []int
		for _, i := range g {
			if states[i].pending {
				why = append(why, i)
			}
			if states[i].done && older[keyOf(i)] {
				reset = append(reset, i)
			}
		}
		if len(why) == 0 || len(reset) == 0 {
			continue
		}
		names := func(is []int) []sluice.TableRef {
			out := make([]sluice.TableRef, len(is))
			for k, i := range is {
				out[k] = l.cfg.Route(specs[i].Table.Ref)
			}
			return out
		}
		for _, i := range reset {
			if err := l.resetTable(ctx, keyOf(i)); err != nil {
				return fmt.Errorf("load: reload %s with its foreign-key group: %w", l.cfg.Route(specs[i].Table.Ref), l.classify(err))
			}
		}
		l.groupReloaded = append(l.groupReloaded, GroupReload{Group: names(g), Pending: names(why), Reloaded: names(reset)})
	}
	return nil
}

// olderChunks returns the target tables (by key) holding a chunk this task
// committed at a snapshot other than now. A chunk without a snapshot of
// its own (written before they were stored) is of the task's first.
func (l *Loader) olderChunks(ctx context.Context, now sluice.Position) (map[string]bool, error) {
	rows, err := l.db.QueryContext(ctx, "SELECT tbl, snapshot FROM "+l.meta.table("load_checkpoint")+" WHERE task = ?", l.cfg.Task)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var tbl string
		var s sql.NullString
		if err := rows.Scan(&tbl, &s); err != nil {
			return nil, err
		}
		if out[tbl] {
			continue
		}
		first := now
		if l.pos != nil {
			first = *l.pos
		}
		p, err := snapshotOr(s, first)
		if err != nil {
			return nil, fmt.Errorf("snapshot of a chunk of %s: %w", tbl, err)
		}
		// The same position is the same data: an idle source gives two
		// runs one snapshot.
		out[tbl] = p != now
	}
	return out, rows.Err()
}

// targetLinks returns the foreign keys between the target tables of specs
// (as pairs of indexes into specs). The tables an earlier run made have
// that run's foreign keys, which a DDL on the source may have dropped
// since: their rows were still linked when the source cascaded between
// the snapshots. The source's keys (TableSpec.Links) add those made since.
func (l *Loader) targetLinks(ctx context.Context, specs []TableSpec) ([][2]int, error) {
	idx := make(map[sluice.TableRef]int, len(specs))
	var schemas []string
	for i, s := range specs {
		tgt := l.cfg.Route(s.Table.Ref)
		idx[tgt] = i
		if !slices.Contains(schemas, tgt.Schema) {
			schemas = append(schemas, tgt.Schema)
		}
	}
	fks, err := schema.ForeignKeysIn(ctx, l.db, schemas)
	if err != nil {
		return nil, err
	}
	var out [][2]int
	for _, fk := range fks {
		c, ok := idx[fk.Child]
		p, ok2 := idx[fk.Parent]
		if ok && ok2 {
			out = append(out, [2]int{c, p})
		}
	}
	return out, nil
}
