package verify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/schema"
)

// Run compares each source table in tables with its routed name on dst and
// returns a report. Differences are not errors: the error is for runs that
// could not finish (a source table that does not exist, a lost connection,
// ctx cancelled). Use Report.Err to turn differences into an error wrapping
// sluice.ErrVerifyDifferent.
//
// The pools should allow cfg.Threads connections each, and their sessions
// must share a time zone (TIMESTAMP values are compared as text).
func Run(ctx context.Context, cfg Config, src, dst *sql.DB, tables []sluice.TableRef) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runner{cfg: cfg, src: src, dst: dst, cancel: cancel}

	jobs := make(chan job)
	var wg sync.WaitGroup
	for i := 0; i < cfg.Threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := r.checkChunk(ctx, j.st, j.rng); err != nil {
					r.fail(fmt.Errorf("verify %s chunk %d: %w", j.st.res.Source, j.rng.Index, err))
				}
			}
		}()
	}

	// Tables are prepared (inspected and planned) one after the other while
	// the workers check the chunks of earlier tables.
	rep := &Report{}
	var states []*tableState
	for _, ref := range tables {
		st, ranges, err := r.prepare(ctx, ref)
		if err != nil {
			r.fail(fmt.Errorf("verify %s: %w", ref, err))
			break
		}
		states = append(states, st)
		rep.Tables = append(rep.Tables, st.res)
		if !r.feed(ctx, jobs, st, ranges) {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if err := r.firstErr(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	for _, st := range states {
		st.finish()
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// Side names a server of the pair.
type Side string

const (
	Source Side = "source"
	Target Side = "target"
)

// QueryError is a statement that failed on one side. It names the side so
// that a caller holding the endpoints can turn it into an error with a fix
// (dbconn.Classify(err, string(qe.Side), endpoint)).
type QueryError struct {
	Side Side
	Op   string // what verify was doing: "checksum", "inspect db.t"
	Err  error
}

func (e *QueryError) Error() string { return e.Op + " on " + string(e.Side) + ": " + e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

type job struct {
	st  *tableState
	rng chunk.Range
}

type runner struct {
	cfg      Config
	src, dst *sql.DB
	cancel   context.CancelFunc

	mu  sync.Mutex
	err error
}

func (r *runner) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *runner) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *runner) feed(ctx context.Context, jobs chan<- job, st *tableState, ranges []chunk.Range) bool {
	for _, rng := range ranges {
		select {
		case jobs <- job{st, rng}:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// tableState collects one table's chunk results from the workers.
type tableState struct {
	t     *sluice.Table // the source definition; its expressions run on both sides
	res   *TableResult
	start time.Time
	max   int

	mu    sync.Mutex
	diffs []chunkDiff // kept sorted by (chunk, pos), at most max long
	end   time.Time   // when the last chunk finished
	// unexplained counts chunks whose checksums differed but whose rows
	// matched when drilled into.
	unexplained int
}

type chunkDiff struct {
	chunk, pos, sub int
	d               Diff
}

// prepare inspects both sides of one table and plans its chunks. A table
// that cannot be compared row by row (missing on the target, other
// columns) gets its final status here and no chunks.
func (r *runner) prepare(ctx context.Context, ref sluice.TableRef) (*tableState, []chunk.Range, error) {
	st := &tableState{start: time.Now(), max: r.cfg.MaxDiffs,
		res: &TableResult{Source: ref, Target: r.cfg.route(ref), Status: StatusEqual}}
	t, err := schema.Inspect(ctx, r.src, ref)
	if err != nil {
		return nil, nil, &QueryError{Side: Source, Op: "inspect " + ref.String(), Err: err}
	}
	st.t = t
	if t.HasKey() {
		st.res.KeyColumns = chunk.KeyColumns(t)
	}
	tt, err := schema.Inspect(ctx, r.dst, st.res.Target)
	if errors.Is(err, sluice.ErrUnknownTable) {
		// information_schema also hides tables the user may not read; only
		// a table that really does not exist is a difference.
		if perr := probeTable(ctx, r.dst, st.res.Target); perr != nil {
			return nil, nil, &QueryError{Side: Target, Op: "read " + st.res.Target.String(), Err: perr}
		}
		r.planned()
		st.res.Status = StatusTargetMissing
		st.res.Detail = fmt.Sprintf("table %s does not exist on the target", st.res.Target)
		st.res.SourceRows, err = countRows(ctx, r.src, Source, ref)
		return st, nil, err
	}
	if err != nil {
		return nil, nil, &QueryError{Side: Target, Op: "inspect " + st.res.Target.String(), Err: err}
	}
	if msg := columnsDiffer(t, tt); msg != "" {
		r.planned()
		st.res.Status = StatusColumnsDiffer
		st.res.Detail = msg
		if st.res.SourceRows, err = countRows(ctx, r.src, Source, ref); err == nil {
			st.res.TargetRows, err = countRows(ctx, r.dst, Target, st.res.Target)
		}
		return st, nil, err
	}
	ranges, err := chunk.Plan(ctx, r.src, t, r.cfg.RowsPerChunk)
	if err != nil {
		return nil, nil, &QueryError{Side: Source, Op: "plan chunks", Err: err}
	}
	st.res.Chunks = len(ranges)
	r.planned()
	if p := r.cfg.Progress; p != nil {
		p.ChunksPlanned.Add(int64(len(ranges)))
	}
	return st, ranges, nil
}

// columnsDiffer compares the stored columns by name, since the row hash
// names them; types may differ (the hash's canonical form absorbs
// character sets and integer widths, and other type changes show as rows
// that differ).
func columnsDiffer(src, dst *sluice.Table) string {
	names := func(t *sluice.Table) map[string]bool {
		m := map[string]bool{}
		for _, ci := range t.WritableColumns() {
			m[strings.ToLower(t.Columns[ci].Name)] = true
		}
		return m
	}
	s, d := names(src), names(dst)
	var lacks, extra []string
	for _, ci := range src.WritableColumns() {
		if n := src.Columns[ci].Name; !d[strings.ToLower(n)] {
			lacks = append(lacks, n)
		}
	}
	for _, ci := range dst.WritableColumns() {
		if n := dst.Columns[ci].Name; !s[strings.ToLower(n)] {
			extra = append(extra, n)
		}
	}
	var p []string
	if len(lacks) > 0 {
		p = append(p, "target lacks column(s) "+strings.Join(lacks, ", "))
	}
	if len(extra) > 0 {
		p = append(p, "target has extra column(s) "+strings.Join(extra, ", "))
	}
	return strings.Join(p, "; ")
}

func (r *runner) planned() {
	if p := r.cfg.Progress; p != nil {
		p.TablesPlanned.Add(1)
	}
}

func countRows(ctx context.Context, db *sql.DB, side Side, ref sluice.TableRef) (int64, error) {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+ref.Quoted()).Scan(&n); err != nil {
		return 0, &QueryError{Side: side, Op: "count rows of " + ref.String(), Err: err}
	}
	return n, nil
}

// probeTable returns nil if ref does not exist (ER_NO_SUCH_TABLE or
// ER_BAD_DB_ERROR), and otherwise the error that reading it gives (no
// privilege, lost connection) or a note that it exists after all.
func probeTable(ctx context.Context, db *sql.DB, ref sluice.TableRef) error {
	rows, err := db.QueryContext(ctx, "SELECT 1 FROM "+ref.Quoted()+" LIMIT 0")
	if err == nil {
		rows.Close()
		return fmt.Errorf("%s is readable but information_schema shows no columns for it", ref)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) {
		return nil
	}
	return err
}

// checksum is one side's aggregate over a chunk.
type checksum struct {
	rows      int64
	high, low string // exact DECIMAL sums, compared as text
	err       error
}

func sumChunk(ctx context.Context, db *sql.DB, query string, args []any) checksum {
	var c checksum
	c.err = db.QueryRowContext(ctx, query, args...).Scan(&c.rows, &c.high, &c.low)
	return c
}

// checkChunk checksums one range on both servers at once and drills into
// it when the checksums differ.
func (r *runner) checkChunk(ctx context.Context, st *tableState, rng chunk.Range) error {
	defer func() {
		st.mu.Lock()
		st.end = time.Now()
		st.mu.Unlock()
	}()
	where, args := rng.Where(st.t)
	if !st.t.HasKey() {
		where, args = "1=1", nil
	}
	s, d, err := r.sumBoth(ctx, st, where, args)
	// Rechecks let a pair that was still catching up settle: only a chunk
	// that differs every time is drilled into.
	for i := 0; err == nil && !s.same(d) && i < r.cfg.Rechecks; i++ {
		r.cfg.at("recheck", st.res.Source, rng.Index)
		timer := time.NewTimer(r.cfg.RecheckDelay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		s, d, err = r.sumBoth(ctx, st, where, args)
	}
	if err != nil {
		return err
	}
	if p := r.cfg.Progress; p != nil {
		p.Chunks.Add(1)
		p.Rows.Add(s.rows)
		if !s.same(d) {
			p.DiffChunks.Add(1)
		}
	}
	st.mu.Lock()
	st.res.SourceRows += s.rows
	st.res.TargetRows += d.rows
	if s.same(d) {
		st.mu.Unlock()
		return nil
	}
	st.res.DiffChunks++
	st.res.Status = StatusDifferent
	st.mu.Unlock()
	r.cfg.at("drill", st.res.Source, rng.Index)
	var explained bool
	if !st.t.HasKey() {
		explained, err = r.drillKeyless(ctx, st, s.rows)
	} else {
		explained, err = r.drillKeyed(ctx, st, rng.Index, where, args)
	}
	if err == nil && !explained {
		// Checksums differed, yet the rows read a moment later match: the
		// tables were being written. Still a difference, but say why no key
		// is listed.
		st.mu.Lock()
		st.unexplained++
		st.mu.Unlock()
	}
	return err
}

// sumBoth checksums one range on both servers at once.
func (r *runner) sumBoth(ctx context.Context, st *tableState, where string, args []any) (s, d checksum, err error) {
	done := make(chan checksum, 1)
	go func() { done <- sumChunk(ctx, r.dst, checksumQuery(st.t, st.res.Target, where), args) }()
	s = sumChunk(ctx, r.src, checksumQuery(st.t, st.res.Source, where), args)
	d = <-done
	if s.err != nil {
		return s, d, &QueryError{Side: Source, Op: "checksum", Err: s.err}
	}
	if d.err != nil {
		return s, d, &QueryError{Side: Target, Op: "checksum " + st.res.Target.String(), Err: d.err}
	}
	return s, d, nil
}

func (c checksum) same(o checksum) bool {
	return c.rows == o.rows && c.high == o.high && c.low == o.low
}

// record adds one chunk's diffs and counts, keeping the first max diffs in
// key order (chunks are in key order, and so are positions within one).
func (st *tableState) record(chunkIdx int, diffs []chunkDiff, missing, extra, different int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.res.Missing += missing
	st.res.Extra += extra
	st.res.Different += different
	for i := range diffs {
		diffs[i].chunk = chunkIdx
	}
	st.diffs = append(st.diffs, diffs...)
	sort.SliceStable(st.diffs, func(a, b int) bool {
		x, y := st.diffs[a], st.diffs[b]
		if x.chunk != y.chunk {
			return x.chunk < y.chunk
		}
		if x.pos != y.pos {
			return x.pos < y.pos
		}
		return x.sub < y.sub
	})
	if len(st.diffs) > st.max {
		st.diffs = st.diffs[:st.max]
	}
}

// finish is called once every chunk is done.
func (st *tableState) finish() {
	if st.end.IsZero() {
		st.end = time.Now()
	}
	st.res.Elapsed = st.end.Sub(st.start)
	if st.unexplained > 0 && st.res.Detail == "" {
		st.res.Detail = fmt.Sprintf("%d chunk(s) had different checksums but matching rows when drilled into: the tables were changing during verify", st.unexplained)
	}
	for _, d := range st.diffs {
		st.res.Diffs = append(st.res.Diffs, d.d)
	}
}
