package apply

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// The scheduler's decisions without a database: these transactions, in
// this order, give these groups (cut by size and by would-wait), on these
// workers (least busy, or chained behind the one worker they overlap), in
// this commit order (seq). The seam is the applier's table cache: each
// table's tableInfo is stored up front, so resolve never reads the target,
// and the test takes the dispatched groups from the workers' channels and
// reports their commits itself.

type schedHarness struct {
	t   *testing.T
	a   *Applier
	s   *scheduler
	got []*unit // dispatched, in seq order
	n   uint32
}

func newSchedHarness(t *testing.T, workers int, mod func(*Config)) *schedHarness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Workers = workers
	// Groups of two transactions, and no growth, unless mod says otherwise.
	cfg.Batch, cfg.MaxBatch, cfg.ChainBatch = 2, 2, 0
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.nextCommit = 1 // as Start sets it
	for i := 0; i < workers; i++ {
		a.workers = append(a.workers, &worker{a: a, id: i, ch: make(chan *unit, 64)})
	}
	s := &scheduler{a: a}
	s.h.SetSeed(hashSeed)
	return &schedHarness{t: t, a: a, s: s}
}

// table stores what resolve would build for tb from the stream's table
// alone (the target adds nothing here): the spec, the primary and unique
// keys as writeset keys, the default key folds, and the foreign keys fk
// as read from a target.
func (h *schedHarness) table(tb *sluice.Table, fk fkRead) {
	info := &tableInfo{spec: sqlgen.NewTableSpec(tb, tb.Ref)}
	seen := map[string]bool{}
	for _, k := range append([][]int{tb.PK}, tb.UniqueKeys...) {
		if s := fmt.Sprint(k); len(k) > 0 && !seen[s] {
			seen[s] = true
			info.keys = append(info.keys, k)
		}
	}
	info.fk = buildFK(tb, tb.Ref, fk, nil)
	var mh maphash.Hash
	mh.SetSeed(hashSeed)
	mh.WriteString(strings.ToLower(tb.Ref.String()))
	info.id = mh.Sum64()
	h.a.tables.Store(tb, info)
}

// take moves what the workers were handed into got.
func (h *schedHarness) take() {
	for _, w := range h.a.workers {
		for len(w.ch) > 0 {
			h.got = append(h.got, <-w.ch)
		}
	}
}

func (h *schedHarness) unit(seq uint64) *unit {
	for _, u := range h.got {
		if u.seq == seq {
			return u
		}
	}
	h.t.Fatalf("no group %d was dispatched", seq)
	return nil
}

// render: "seq@worker[gtids]" per dispatched group in seq order, then the
// open group.
func (h *schedHarness) render() string {
	h.take()
	var out []string
	for seq := uint64(1); seq <= h.a.lastSeq; seq++ {
		u := h.unit(seq)
		out = append(out, fmt.Sprintf("%d@w%d%s", u.seq, u.worker, gtids(u)))
	}
	if h.s.open != nil {
		out = append(out, "open"+gtids(h.s.open))
	}
	return strings.Join(out, " ")
}

func gtids(u *unit) string {
	var g []string
	for _, t := range u.txns {
		g = append(g, t.gtid)
	}
	return "[" + strings.Join(g, " ") + "]"
}

// step is one thing that happens to the scheduler.
type step func(h *schedHarness)

// tx: a source transaction arrives, whole.
func tx(gtid string, changes ...sluice.RowChange) step {
	return func(h *schedHarness) {
		h.t.Helper()
		h.n++
		ctx := context.Background()
		for _, it := range []sluice.StreamItem{
			{Kind: sluice.ItemBegin, GTID: gtid},
			{Kind: sluice.ItemRows, Changes: changes},
			{Kind: sluice.ItemCommit, End: pos("bin.000001", 100*h.n)},
		} {
			if err := h.s.handle(ctx, it); err != nil {
				h.t.Fatalf("%s: %v", gtid, err)
			}
		}
		h.take()
	}
}

// commit: the worker of group seq committed it.
func commit(seq uint64) step {
	return func(h *schedHarness) {
		h.take()
		u := h.unit(seq)
		h.a.committed(seq, u, u.txns[len(u.txns)-1].end, len(u.txns), u.rows, 0)
		h.a.workers[u.worker].load.Add(-1)
	}
}

// dispatch: the input ran dry, or a flush: the open group is sent off.
func dispatch() step {
	return func(h *schedHarness) {
		if err := h.s.dispatchOpen(context.Background()); err != nil {
			h.t.Fatal(err)
		}
		h.take()
	}
}

// wouldWait: whether sending the open group off now would wait.
func wouldWait(want bool) step {
	return func(h *schedHarness) {
		if got := h.s.wouldWait(); got != want {
			h.t.Fatalf("wouldWait = %v, want %v (groups so far: %s)", got, want, h.render())
		}
	}
}

var (
	// t: PRIMARY KEY (id), UNIQUE (u) over a nullable column.
	tT = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, Columns: []sluice.Column{
		{Name: "id", DataType: "int"}, {Name: "u", DataType: "varchar", Nullable: true}, {Name: "v", DataType: "varchar", Nullable: true}},
		PK: []int{0}, PKIsPrimary: true, UniqueKeys: [][]int{{0}, {1}}}
	// o: the same shape as t, another table.
	tO = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "o"}, Columns: tT.Columns, PK: []int{0}, PKIsPrimary: true, UniqueKeys: [][]int{{0}}}
	// k: no key at all.
	tK = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "k"}, Columns: []sluice.Column{{Name: "a", DataType: "int", Nullable: true}}}
	// p and c: c.pid references p.id, ON DELETE CASCADE; r.pid references
	// p.id with no action.
	tP = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "p"}, Columns: []sluice.Column{{Name: "id", DataType: "int"}}, PK: []int{0}, PKIsPrimary: true}
	tC = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "c"}, Columns: []sluice.Column{{Name: "id", DataType: "int"}, {Name: "pid", DataType: "int", Nullable: true}}, PK: []int{0}, PKIsPrimary: true}
	tR = &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "r"}, Columns: tC.Columns, PK: []int{0}, PKIsPrimary: true}

	fkC = schema.ForeignKey{Name: "fc", Child: tC.Ref, Columns: []string{"pid"}, Parent: tP.Ref, RefColumns: []string{"id"}, OnDelete: "CASCADE", OnUpdate: "RESTRICT"}
	fkR = schema.ForeignKey{Name: "fr", Child: tR.Ref, Columns: []string{"pid"}, Parent: tP.Ref, RefColumns: []string{"id"}, OnDelete: "RESTRICT", OnUpdate: "RESTRICT"}
)

func ins(tb *sluice.Table, row ...any) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Insert, Table: tb, After: row}
}

func upd(tb *sluice.Table, before, after []any) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Update, Table: tb, Before: before, After: after}
}

func del(tb *sluice.Table, row ...any) sluice.RowChange {
	return sluice.RowChange{Kind: sluice.Delete, Table: tb, Before: row}
}

func TestSchedulerGroups(t *testing.T) {
	one := func(c *Config) { c.Batch, c.MaxBatch = 1, 1 } // one transaction per group
	big := strings.Repeat("x", 3000)
	cases := []struct {
		name    string
		workers int
		cfg     func(*Config)
		steps   []step
		want    string
		// Stats after the steps.
		chained, conflicts, grown uint64
	}{
		{name: "independent groups go to the least busy worker", workers: 2,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)), tx("g3", ins(tT, 3, nil, nil)), tx("g4", ins(tT, 4, nil, nil)), tx("g5", ins(tT, 5, nil, nil))},
			want:  "1@w0[g1 g2] 2@w1[g3 g4] open[g5]"},
		{name: "a group overlapping one worker's goes behind them", workers: 2,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)),
				tx("g3", upd(tT, []any{1, nil, nil}, []any{1, nil, "v"})), tx("g4", ins(tT, 9, nil, nil)),
				tx("g5", ins(tT, 5, nil, nil)), tx("g6", ins(tT, 6, nil, nil)), dispatch()},
			want: "1@w0[g1 g2] 2@w0[g3 g4] 3@w1[g5 g6]", chained: 1},
		// A group is sent off when the next transaction does not fit in
		// it: g2 leaves when g3 arrives, after g1 committed.
		{name: "a committed group no longer chains", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)), commit(1), tx("g3", del(tT, 1, nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2] 3@w1[g3]"},
		// The old and the new key of an UPDATE both count.
		{name: "an update's old and new key", workers: 2, cfg: one,
			steps: []step{tx("g1", upd(tT, []any{1, nil, nil}, []any{2, nil, nil})), tx("g2", ins(tT, 3, nil, nil)), tx("g3", del(tT, 2, nil, nil)), tx("g4", ins(tT, 1, nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w1[g2] 3@w0[g3] 4@w0[g4]", chained: 2},
		// NULLs never collide in a unique key.
		{name: "NULL unique values do not conflict", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w1[g2]"},
		{name: "equal unique values conflict", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, "x", nil)), tx("g2", ins(tT, 2, "x", nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2]", chained: 1},
		// The default fold: values a case- and pad-insensitive collation
		// may take as equal conflict (a false conflict costs parallelism only).
		{name: "folded unique values conflict", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, "ab", nil)), tx("g2", ins(tT, 2, "AB  ", nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2]", chained: 1},
		{name: "a non-key column does not conflict", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, "same")), tx("g2", ins(tT, 2, nil, "same")), dispatch()},
			want:  "1@w0[g1] 2@w1[g2]"},
		{name: "one value in integer types of two widths", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, int32(7), nil, nil)), tx("g2", del(tT, int64(7), nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2]", chained: 1},
		{name: "the same key in another table", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tO, 1, nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w1[g2]"},
		{name: "a keyless table applies serially", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tK, 1)), tx("g2", ins(tK, 2)), tx("g3", ins(tT, 3, nil, nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2] 3@w1[g3]", chained: 1},
		// Overlapping two workers' groups: it waits until one commits,
		// then goes behind the other.
		{name: "overlapping two workers waits", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)),
				tx("g3", upd(tT, []any{1, nil, nil}, []any{1, nil, "a"}), upd(tT, []any{2, nil, nil}, []any{2, nil, "b"})),
				wouldWait(true), commit(1), wouldWait(false), dispatch()},
			want: "1@w0[g1] 2@w1[g2] 3@w1[g3]", chained: 1, conflicts: 1},
		// A group grows past Batch while sending it would only wait, and
		// is sent when it would not.
		{name: "a group that would wait grows", workers: 2, cfg: func(c *Config) { c.MaxBatch, c.ChainBatch = 4, 8 },
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", ins(tT, 2, nil, nil)), tx("g3", ins(tT, 3, nil, nil)), tx("g4", ins(tT, 4, nil, nil)),
				tx("g5", del(tT, 1, nil, nil), del(tT, 3, nil, nil)), tx("g6", ins(tT, 10, nil, nil)), tx("g7", ins(tT, 11, nil, nil)),
				tx("g8", ins(tT, 12, nil, nil)), tx("g9", ins(tT, 13, nil, nil)), wouldWait(true), commit(1), dispatch()},
			want: "1@w0[g1 g2] 2@w1[g3 g4] 3@w1[g5 g6 g7 g8 g9]", chained: 1, conflicts: 1, grown: 1},
		// BatchBytes cuts a group before Batch.
		{name: "bytes cut a group", workers: 2, cfg: func(c *Config) { c.Batch, c.MaxBatch, c.BatchBytes, c.ChainBytes = 100, 100, 4096, 0 },
			steps: []step{tx("g1", ins(tT, 1, nil, big)), tx("g2", ins(tT, 2, nil, big)), tx("g3", ins(tT, 3, nil, nil)), tx("g4", ins(tT, 4, nil, nil))},
			want:  "1@w0[g1] open[g2 g3 g4]"},
		// A delete that cascades through a foreign key overlaps every
		// uncommitted group, and every later group overlaps it until it
		// commits.
		{name: "a cascading delete is a barrier", workers: 3, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", del(tP, 1)), tx("g3", ins(tT, 5, nil, nil)), dispatch(),
				commit(1), commit(2), tx("g4", ins(tT, 6, nil, nil)), dispatch()},
			want: "1@w0[g1] 2@w0[g2] 3@w0[g3] 4@w1[g4]", chained: 2},
		// Without an action, a parent's key and a child's reference to it
		// conflict; other references do not.
		{name: "a child's reference overlaps its parent's key", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tP, 1)), tx("g2", ins(tR, 10, 1)), tx("g3", ins(tR, 11, 2)), tx("g4", ins(tR, 12, nil)), dispatch()},
			want:  "1@w0[g1] 2@w0[g2] 3@w1[g3] 4@w1[g4]", chained: 1},
		// The checks are off for the change (foreign_key_checks=0 on the
		// source): no action runs, so no barrier.
		{name: "no checks, no barrier", workers: 2, cfg: one,
			steps: []step{tx("g1", ins(tT, 1, nil, nil)), tx("g2", sluice.RowChange{Kind: sluice.Delete, Table: tP, Before: []any{7}, NoFKChecks: true}), dispatch()},
			want:  "1@w0[g1] 2@w1[g2]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newSchedHarness(t, c.workers, c.cfg)
			for _, tb := range []*sluice.Table{tT, tO, tK} {
				h.table(tb, fkRead{})
			}
			h.table(tP, fkRead{in: []schema.ForeignKey{fkC, fkR}})
			h.table(tC, fkRead{out: []schema.ForeignKey{fkC}})
			h.table(tR, fkRead{out: []schema.ForeignKey{fkR}})
			for _, st := range c.steps {
				st(h)
			}
			if got := h.render(); got != c.want {
				t.Errorf("groups\n got  %s\n want %s", got, c.want)
			}
			st := h.a.stats
			if st.Chained != c.chained || st.Conflicts != c.conflicts || st.Grown != c.grown {
				t.Errorf("stats chained %d conflicts %d grown %d, want %d %d %d", st.Chained, st.Conflicts, st.Grown, c.chained, c.conflicts, c.grown)
			}
		})
	}
}

// TestSchedulerCommitOrder: groups are numbered in source order, and the
// low-water mark (what the checkpoint says is applied) moves over groups
// committed without a gap only: a group committed ahead of an earlier one
// (RelaxedOrder) waits in ahead until the gap closes.
func TestSchedulerCommitOrder(t *testing.T) {
	h := newSchedHarness(t, 3, func(c *Config) { c.Batch, c.MaxBatch = 1, 1 })
	h.table(tT, fkRead{})
	for i, g := range []string{"g1", "g2", "g3"} {
		tx(g, ins(tT, i+1, nil, nil))(h)
	}
	dispatch()(h)
	if got, want := h.render(), "1@w0[g1] 2@w1[g2] 3@w2[g3]"; got != want {
		t.Fatalf("groups %s, want %s", got, want)
	}
	end := func(seq uint64) sluice.Position { return h.unit(seq).txns[0].end }
	for _, c := range []struct {
		commit     uint64
		applied    sluice.Position
		next       uint64
		outOfOrder uint64
	}{
		{commit: 2, applied: sluice.Position{}, next: 1, outOfOrder: 1},
		{commit: 3, applied: sluice.Position{}, next: 1, outOfOrder: 2},
		{commit: 1, applied: end(3), next: 4, outOfOrder: 2},
	} {
		commit(c.commit)(h)
		a := h.a
		if a.stats.Applied != c.applied || a.nextCommit != c.next || a.stats.OutOfOrder != c.outOfOrder {
			t.Errorf("after commit %d: applied %v next %d out of order %d; want %v %d %d",
				c.commit, a.stats.Applied, a.nextCommit, a.stats.OutOfOrder, c.applied, c.next, c.outOfOrder)
		}
	}
	if len(h.a.ahead) != 0 || len(h.a.owner) != 0 {
		t.Errorf("after every commit: ahead %v, owners %d", h.a.ahead, len(h.a.owner))
	}
}

// TestSchedulerRelaxedWindow: with RelaxedOrder, a group waits while
// relaxedWindow groups per worker are past the low-water mark, however
// independent it is.
func TestSchedulerRelaxedWindow(t *testing.T) {
	h := newSchedHarness(t, 1, func(c *Config) { c.Batch, c.MaxBatch, c.RelaxedOrder = 1, 1, true })
	h.table(tT, fkRead{})
	for i := 1; i <= relaxedWindow+1; i++ {
		tx(fmt.Sprintf("g%d", i), ins(tT, i, nil, nil))(h)
	}
	// relaxedWindow groups dispatched, the next one open.
	if h.a.lastSeq != relaxedWindow {
		t.Fatalf("dispatched %d groups, want %d: %s", h.a.lastSeq, relaxedWindow, h.render())
	}
	wouldWait(true)(h)
	// The last one committing ahead of the first does not open the window.
	commit(relaxedWindow)(h)
	wouldWait(true)(h)
	commit(1)(h)
	wouldWait(false)(h)
	if h.a.stats.Conflicts != 1 {
		t.Errorf("conflicts %d, want 1 (the open group, counted once)", h.a.stats.Conflicts)
	}
}
