package load

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/fence"
	"github.com/sluice-db/sluice/sqlgen"
)

// Loader loads chunks into the target on PoolSize connections.
//
// Use: Open, then Prepare with every table, Start, then LoadFile or
// OpenChunk per chunk (from any number of goroutines), then Wait. Close
// releases the connections.
type Loader struct {
	cfg   Config
	db    *sql.DB
	meta  meta
	done  map[chunkKey]bool
	plans map[string]dumpfmt.Plan
	pos   *sluice.Position
	// snap is this run's snapshot position (JSON), stored with every chunk
	// so that replication can tell which snapshot a chunk holds.
	snap string
	// reloaded lists the partly loaded tables this run empties and loads
	// whole (Config.ReloadMixed).
	reloaded []sluice.TableRef
	remade   []sluice.TableRef
	// groupReloaded lists the tables Prepare emptied to load them with
	// their foreign-key group (fkgroups.go).
	groupReloaded []GroupReload

	tables map[sluice.TableRef]*target // by source name
	// flavor is the target's kind, read once at Open (tidb.go).
	flavor dbconn.Flavor
	stats  Stats
	budget *budget

	jobs    chan *job
	wg      sync.WaitGroup
	runCtx  context.Context
	cancel  context.CancelCauseFunc
	errOnce sync.Once
	err     error
}

type target struct {
	ref  sluice.TableRef
	key  string
	spec sqlgen.LoadSpec
	// pending is the number of chunks this run loads.
	pending int
	// whole says the table loads as one stream in one transaction.
	whole bool
	// started says an earlier run committed chunks of this table.
	started bool
	// generated names the table's generated columns (lower case), nil
	// when it has none (see lenient).
	generated map[string]bool
	tjOnce    sync.Once
	tj        *tableJob
	tjErr     error
	// done counts the chunks this run committed (Progress).
	done atomic.Int64
	// nontx is set when the table's engine has no transactions (nontx.go).
	nontx *nontxTarget
}

// TableProgress is one table's share of the copy: chunks this run committed
// of those it loads.
type TableProgress struct {
	Table       sluice.TableRef
	Done, Total int64
}

// Progress lists every table's progress, by name.
func (l *Loader) Progress() []TableProgress {
	out := make([]TableProgress, 0, len(l.tables))
	for _, t := range l.tables {
		out = append(out, TableProgress{Table: t.ref, Done: t.done.Load(), Total: int64(t.pending)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table.String() < out[j].Table.String() })
	return out
}

// TableSpec is one source table and its chunk plan.
type TableSpec struct {
	Table *sluice.Table
	Plan  dumpfmt.Plan
	// Links names the source tables that this one shares a foreign key
	// with, as child or as parent (itself for a key on its own rows). With
	// Config.ReloadMixed, tables linked this way are copied from one
	// snapshot (see fkgroups.go).
	Links []sluice.TableRef
}

type job struct {
	table *tableJob // set for a whole-table job
	tgt   *target
	index int
	open  func() (io.Reader, error)
	rows  func() (int64, error)
	pipe  *Pipe
	retry bool
}

// Open connects to the target, creates the checkpoint tables if needed and
// reads what earlier runs of this task have done.
func Open(ctx context.Context, cfg Config) (_ *Loader, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Route == nil {
		cfg.Route = func(t sluice.TableRef) sluice.TableRef { return t }
	}
	params := map[string]string{
		// Strict, so a value that does not fit fails instead of being
		// altered; zero dates and invalid dates stay as the source has them;
		// an explicit 0 in an AUTO_INCREMENT column stays 0.
		"sql_mode": "'" + strictSQLMode + "'",
		// Rows are copied as the source holds them: a row written under
		// check_constraint_checks=0 violates a CHECK constraint and must
		// load all the same, as it does on a native replica (issue 29,
		// N13). MariaDB only (MySQL has no such variable and skips the
		// comment); the driver sends the params as one SET, so the
		// comment rides on foreign_key_checks.
		"foreign_key_checks": "0 /*M!100201 , check_constraint_checks=0 */",
		"net_read_timeout":   "86400",
		"net_write_timeout":  "86400",
	}
	if cfg.DisableBinlog {
		params["sql_log_bin"] = "0"
	}
	l := &Loader{cfg: cfg, tables: map[sluice.TableRef]*target{}, budget: newBudget(cfg.StreamMemory)}
	// A killed run's last chunk (rows and checkpoint row in one
	// transaction) may still be committing on the target: wait for its
	// sessions to end before reading the checkpoints, or its rows would
	// land in a table this run believes it has not loaded yet (difftest
	// bug K: "already holds rows that this task did not load").
	if err := waitLoadFence(ctx, cfg); err != nil {
		return nil, err
	}
	l.db, err = dbconn.Open(ctx, "target", cfg.Target, dbconn.Options{MaxOpen: cfg.PoolSize + 2, Params: params,
		Wrap: func(c driver.Connector) driver.Connector { return fence.Connector(c, "load", cfg.Task) }})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.db.Close()
		}
	}()
	if l.flavor, err = targetFlavor(ctx, l.db); err != nil {
		return nil, fmt.Errorf("load: %w", l.classify(err))
	}
	l.meta = meta{db: l.db, schema: cfg.MetaSchema, task: cfg.Task}
	if err := l.meta.ensure(ctx); err != nil {
		return nil, fmt.Errorf("load: create checkpoint tables in %s: %w", cfg.MetaSchema, l.classify(err))
	}
	if err := l.finishResets(ctx); err != nil {
		return nil, fmt.Errorf("load: %w", l.classify(err))
	}
	if l.done, err = l.meta.done(ctx); err != nil {
		return nil, fmt.Errorf("load: read checkpoints: %w", l.classify(err))
	}
	if l.plans, err = l.meta.plans(ctx); err != nil {
		return nil, fmt.Errorf("load: read chunk plans: %w", l.classify(err))
	}
	if l.pos, err = l.meta.position(ctx); err != nil {
		return nil, fmt.Errorf("load: read task position: %w", l.classify(err))
	}
	return l, nil
}

// fenceWait bounds the wait for a killed run's load sessions to end.
const fenceWait = 2 * time.Minute

// waitLoadFence waits until no session of an earlier run of this task's
// load is alive on the target (see package fence).
func waitLoadFence(ctx context.Context, cfg Config) error {
	plain, err := dbconn.Open(ctx, "target", cfg.Target, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return err
	}
	defer plain.Close()
	if err := fence.Wait(ctx, plain, "load", cfg.Task, fenceWait, "load task "+cfg.Task); err != nil {
		return dbconn.Classify(err, "target", cfg.Target)
	}
	return nil
}

// Close releases the connections.
func (l *Loader) Close() error { return l.db.Close() }

// Stats are live counters.
func (l *Loader) Stats() *Stats { return &l.stats }

// Resumed reports whether an earlier run of this task committed anything.
func (l *Loader) Resumed() bool { return l.pos != nil }

// Reloaded lists the tables that Prepare emptied to load them whole from
// this run's snapshot (Config.ReloadMixed).
func (l *Loader) Reloaded() []sluice.TableRef { return l.reloaded }

// Remade lists the tables that Prepare emptied to load them whole in the
// source's new definition (a DDL changed them after their first chunks).
func (l *Loader) Remade() []sluice.TableRef { return l.remade }

// FirstPosition is the snapshot position recorded by the task's first run,
// or nil. After a resumed run the data is from several snapshots, and the
// incremental copy must start from this, the earliest one.
func (l *Loader) FirstPosition() *sluice.Position { return l.pos }

// Plan returns the chunk plan an earlier run stored for source table src.
func (l *Loader) Plan(src sluice.TableRef) (dumpfmt.Plan, bool) {
	p, ok := l.plans[tblKey(l.cfg.Route(src))]
	return p, ok
}

// WholeTable reports whether source table src loads as one stream in one
// transaction. Its chunks must then be handed over one table after another
// (before the next table's), and after Prepare.
func (l *Loader) WholeTable(src sluice.TableRef) bool {
	t, ok := l.tables[src]
	return ok && t.whole
}

// Done reports whether a chunk of source table src was committed before.
func (l *Loader) Done(src sluice.TableRef, index int) bool {
	return l.done[chunkKey{tblKey(l.cfg.Route(src)), index}]
}

// Prepare records the snapshot position (first run only), creates the
// target tables or checks the existing ones, and stores the chunk plans.
func (l *Loader) Prepare(ctx context.Context, pos sluice.Position, specs []TableSpec) error {
	if err := l.meta.savePosition(ctx, pos); err != nil {
		return fmt.Errorf("load: %w", dbconn.Classify(err, "target", l.cfg.Target))
	}
	if l.pos == nil {
		p := pos
		l.pos = &p
	}
	b, err := json.Marshal(pos)
	if err != nil {
		return err
	}
	l.snap = string(b)
	if err := l.resetFKGroups(ctx, specs); err != nil {
		return err
	}
	seen := map[sluice.TableRef]sluice.TableRef{}
	var total, skipped int64
	for _, s := range specs {
		tgt := l.cfg.Route(s.Table.Ref)
		if other, dup := seen[tgt]; dup {
			return &sluice.Error{Op: "load", Err: fmt.Errorf("%w: %s and %s both route to %s", sluice.ErrConfig, other, s.Table.Ref, tgt),
				Hint: "merging tables is not supported by the full copy; change routes so each target table has one source"}
		}
		seen[tgt] = s.Table.Ref
		key := tblKey(tgt)
		started, pending := false, 0
		for _, c := range s.Plan {
			if l.done[chunkKey{key, c.Index}] {
				started = true
				skipped++
			} else {
				total++
				pending++
			}
		}
		if started && pending > 0 && l.cfg.ReloadMixed && !mixedSafe(s.Table) {
			// Replication could not tell this table's chunks of the two
			// snapshots apart: load it whole from this one.
			if err := l.resetTable(ctx, key); err != nil {
				return fmt.Errorf("load: reload %s: %w", tgt, l.classify(err))
			}
			l.reloaded = append(l.reloaded, tgt)
			skipped -= int64(len(s.Plan) - pending)
			total += int64(len(s.Plan) - pending)
			pending, started = len(s.Plan), false
		}
		if started && pending > 0 {
			// A DDL on the source since this task made the table and loaded
			// its first chunks: the rest cannot be loaded into it, so it is
			// loaded again whole, in the new definition.
			if changed, err := l.changedSinceMade(ctx, s.Table, tgt); err != nil {
				return err
			} else if changed {
				if err := l.resetTable(ctx, key); err != nil {
					return fmt.Errorf("load: reload %s: %w", tgt, l.classify(err))
				}
				l.remade = append(l.remade, tgt)
				skipped -= int64(len(s.Plan) - pending)
				total += int64(len(s.Plan) - pending)
				pending, started = len(s.Plan), false
			}
		}
		if err := l.meta.savePlan(ctx, tgt, s.Table.Ref, s.Plan, l.snap); err != nil {
			return fmt.Errorf("load: save plan of %s: %w", tgt, dbconn.Classify(err, "target", l.cfg.Target))
		}
		if pending > 0 {
			if err := l.clearPending(ctx, s.Table, tgt, s.Plan, started); err != nil {
				return fmt.Errorf("load: empty what an interrupted run left in %s: %w", tgt, l.classify(err))
			}
		}
		if err := l.prepareTable(ctx, s.Table, tgt, started, pending == 0); err != nil {
			return err
		}
		nontx, err := l.nonTransactional(ctx, tgt)
		if err != nil {
			return fmt.Errorf("load: %w", l.classify(err))
		}
		if nontx && !started && pending > 0 {
			if err := l.meta.claim(ctx, tgt); err != nil {
				return fmt.Errorf("load: %w", l.classify(err))
			}
		}
		whole := l.cfg.CommitUnit == CommitTable ||
			l.cfg.CommitUnit == CommitAuto && !started && len(s.Plan) <= l.cfg.BulkMaxChunks
		l.tables[s.Table.Ref] = &target{ref: tgt, key: key, spec: loadSpec(s.Table, tgt), pending: pending, whole: whole, started: started, generated: generatedNames(s.Table)}
		if nontx {
			l.tables[s.Table.Ref].nontx = &nontxTarget{src: s.Table, ranges: s.Plan.Ranges()}
		}
	}
	l.stats.TotalChunks.Store(total)
	l.stats.Skipped.Store(skipped)
	return nil
}

func loadSpec(t *sluice.Table, tgt sluice.TableRef) sqlgen.LoadSpec {
	s := sqlgen.LoadSpec{Table: tgt}
	for _, ci := range t.WritableColumns() {
		c := t.Columns[ci]
		s.Columns = append(s.Columns, sqlgen.LoadColumn{Name: c.Name, Via: dumpfmt.LoadVia(c)})
	}
	return s
}

// Start starts the pool.
func (l *Loader) Start(ctx context.Context) {
	l.runCtx, l.cancel = context.WithCancelCause(ctx)
	l.jobs = make(chan *job, l.cfg.PoolSize)
	for i := 0; i < l.cfg.PoolSize; i++ {
		l.wg.Add(1)
		go l.worker()
	}
}

func (l *Loader) fail(err error) {
	l.errOnce.Do(func() {
		l.err = err
		l.cancel(err)
	})
}

func (l *Loader) worker() {
	defer l.wg.Done()
	for j := range l.jobs {
		if l.runCtx.Err() != nil {
			if j.pipe != nil {
				j.pipe.closeRead(context.Cause(l.runCtx))
			}
			continue
		}
		run := l.runJob
		if j.table != nil {
			run = l.runTable
		}
		if err := run(l.runCtx, j); err != nil {
			l.fail(err)
		}
	}
}

func (l *Loader) runJob(ctx context.Context, j *job) error {
	for attempt := 1; ; attempt++ {
		err := l.loadChunk(ctx, j)
		if err == nil || !j.retry || attempt == 3 || !dbconn.IsRetryable(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt) * time.Second):
		case <-ctx.Done():
			return err
		}
	}
}

func (l *Loader) enqueue(ctx context.Context, j *job) error {
	select {
	case l.jobs <- j:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-l.runCtx.Done():
		return context.Cause(l.runCtx)
	}
}

func (l *Loader) target(src sluice.TableRef) (*target, error) {
	t, ok := l.tables[src]
	if !ok {
		return nil, fmt.Errorf("load: table %s was not prepared", src)
	}
	return t, nil
}

// OpenChunk queues a streamed chunk of source table src. The caller writes
// the chunk's rows to the returned pipe and ends it with Commit or Abort.
func (l *Loader) OpenChunk(ctx context.Context, src sluice.TableRef, r chunk.Range) (*Pipe, error) {
	t, err := l.target(src)
	if err != nil {
		return nil, err
	}
	p := newPipe(l.budget, l.cfg.StreamBuffer)
	// If the pool stops, a dump worker blocked on this pipe must wake up.
	stop := context.AfterFunc(l.runCtx, func() { p.closeRead(context.Cause(l.runCtx)) })
	j := &job{tgt: t, index: r.Index, pipe: p,
		open: func() (io.Reader, error) { return p, nil },
		rows: func() (int64, error) { stop(); return p.result() }}
	if t.whole {
		if err := l.addToTable(ctx, j); err != nil {
			stop()
			return nil, err
		}
		return p, nil
	}
	if err := l.enqueue(ctx, j); err != nil {
		stop()
		return nil, err
	}
	return p, nil
}

// LoadFile queues a chunk file of a dump directory.
func (l *Loader) LoadFile(ctx context.Context, src sluice.TableRef, c dumpfmt.ChunkMeta, path string) error {
	t, err := l.target(src)
	if err != nil {
		return err
	}
	j := &job{tgt: t, index: c.Index, retry: true,
		open: func() (io.Reader, error) { return os.Open(path) },
		rows: func() (int64, error) { return c.Rows, nil }}
	if t.whole {
		return l.addToTable(ctx, j)
	}
	return l.enqueue(ctx, j)
}

// Wait waits for every queued chunk and stops the pool. It returns the
// first error. On success it marks the task finished.
func (l *Loader) Wait() error {
	close(l.jobs)
	l.wg.Wait()
	if l.err != nil {
		return l.err
	}
	if err := context.Cause(l.runCtx); err != nil {
		return err
	}
	l.cancel(nil)
	return l.meta.finish(context.Background())
}

// Abort stops the pool with err (the dump side failed).
func (l *Loader) Abort(err error) { l.fail(err) }

var readerSeq atomic.Int64

// maxStatement bounds a multi-row INSERT's size (the server's
// max_allowed_packet is 16 MB by default on MariaDB, 64 MB on MySQL 8).
const maxStatement = 4 << 20

// countingReader counts bytes for progress and the checkpoint row.
type countingReader struct {
	r     io.Reader
	n     int64
	stats *Stats
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.stats.Bytes.Add(int64(n))
	return n, err
}

// loadChunk loads one chunk and its checkpoint row in one transaction.
func (l *Loader) loadChunk(ctx context.Context, j *job) (err error) {
	l.stats.markStart()
	r, err := j.open()
	if err != nil {
		return fmt.Errorf("load %s chunk %d: %w", j.tgt.ref, j.index, err)
	}
	if c, ok := r.(io.Closer); ok && j.pipe == nil {
		defer c.Close()
	}
	cr := &countingReader{r: r, stats: &l.stats}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return dbconn.Classify(err, "target", l.cfg.Target)
	}
	defer conn.Close()
	// A session a failure left lenient must not load another table.
	defer func() {
		if err != nil && j.tgt.generated != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return dbconn.Classify(err, "target", l.cfg.Target)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
			if j.pipe != nil {
				j.pipe.closeRead(err)
			}
		}
	}()
	var loaded int64
	if err = j.tgt.nontx.clear(ctx, tx, j.tgt.ref, j.index); err != nil {
		return l.chunkErr(j, err)
	}
	if err = lenient(ctx, tx, j.tgt); err != nil {
		return l.chunkErr(j, err)
	}
	if l.cfg.RowsPerStatement == 0 {
		loaded, err = l.loadData(ctx, tx, j.tgt, j, cr)
	} else {
		loaded, err = l.insertRows(ctx, tx, j.tgt, j, cr)
	}
	if err == nil {
		err = strict(ctx, tx, j.tgt)
	}
	if err != nil {
		return l.chunkErr(j, err)
	}
	want, err := j.rows()
	if err != nil {
		return fmt.Errorf("load %s chunk %d: %w", j.tgt.ref, j.index, err)
	}
	if loaded != want {
		return fmt.Errorf("load %s chunk %d: %d rows written, %d expected (a duplicate key or a rejected value); the chunk was rolled back", j.tgt.ref, j.index, loaded, want)
	}
	if _, err = tx.ExecContext(ctx, l.meta.checkpointSQL(), l.cfg.Task, j.tgt.key, j.index, loaded, cr.n, l.snap); err != nil {
		return l.chunkErr(j, err)
	}
	if l.cfg.ChunkDelay > 0 {
		select {
		case <-time.After(l.cfg.ChunkDelay):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err = tx.Commit(); err != nil {
		return l.chunkErr(j, err)
	}
	l.stats.Rows.Add(loaded)
	l.stats.Chunks.Add(1)
	j.tgt.done.Add(1)
	l.stats.markEnd()
	return nil
}

func (l *Loader) chunkErr(j *job, err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1148 || me.Number == 3948 || me.Number == 4166) {
		return &sluice.Error{Op: "load " + j.tgt.ref.String() + " on target " + l.cfg.Target.Addr(), Err: fmt.Errorf("%w: LOAD DATA LOCAL INFILE is disabled: %s", sluice.ErrConfig, me.Message),
			Hint: "SET GLOBAL local_infile=1 on the target, or set rows-per-statement to use INSERTs"}
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	if j.table != nil {
		// A whole-table job has no chunk of its own (its index is 0).
		return fmt.Errorf("load %s (its %d chunks in one transaction): %w", j.tgt.ref, j.table.n, l.classify(err))
	}
	return fmt.Errorf("load %s chunk %d: %w", j.tgt.ref, j.index, l.classify(err))
}

// privilegeHint says what the target user needs.
const privilegeHint = "GRANT SELECT, INSERT, CREATE ON *.* TO the target user (or SELECT, INSERT, UPDATE, CREATE on sluice_meta.* and on every target schema)"

// classify is dbconn.Classify, except that "access denied to a database"
// and the other missing-privilege errors get a fix that names the grants a
// load needs (the generic one points at the password).
func (l *Loader) classify(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1142, 1143, 1227, 1370:
			return &sluice.Error{Op: "target " + l.cfg.Target.Addr(), Err: fmt.Errorf("%w: %s", sluice.ErrPrivilege, me.Message), Hint: privilegeHint}
		}
	}
	return dbconn.Classify(err, "target", l.cfg.Target)
}

func (l *Loader) loadData(ctx context.Context, tx *sql.Tx, t *target, j *job, r io.Reader) (int64, error) {
	name := fmt.Sprintf("sluice-%d", readerSeq.Add(1))
	mysql.RegisterReaderHandler(name, func() io.Reader { return r })
	defer mysql.DeregisterReaderHandler(name)
	res, err := tx.ExecContext(ctx, sqlgen.LoadData("Reader::"+name, j.tgt.spec))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	// LOAD DATA LOCAL turns errors into warnings (the server cannot stop the
	// client mid-file), so a warning means a value was altered or skipped.
	if err := checkWarnings(ctx, tx, t, l.flavor); err != nil {
		return 0, err
	}
	return n, nil
}

// checkWarnings fails when the last statement raised a warning, except one
// about a generated column of t (see lenient).
func checkWarnings(ctx context.Context, tx *sql.Tx, t *target, f dbconn.Flavor) error {
	rows, err := tx.QueryContext(ctx, warningsQuery(f, t.generated != nil))
	if err != nil {
		return err
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var level, msg string
		var code int
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return err
		}
		if t.generated != nil && (t.generated[warnedColumn(msg)] || exprWarning(code, msg)) {
			continue
		}
		if !strings.EqualFold(level, "note") || t.generated != nil {
			msgs = append(msgs, fmt.Sprintf("%s %d: %s", level, code, msg))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if f == dbconn.TiDB && len(msgs) > 3 {
		msgs = msgs[:3] // as LIMIT 3 does on MariaDB
	}
	if len(msgs) > 0 {
		return fmt.Errorf("the server altered or rejected values (%s); the chunk was rolled back", strings.Join(msgs, "; "))
	}
	return nil
}

// insertRows is the multi-row INSERT path: it parses the chunk text and
// sends RowsPerStatement rows per statement, all in the chunk's transaction.
func (l *Loader) insertRows(ctx context.Context, tx *sql.Tx, t *target, j *job, r io.Reader) (int64, error) {
	rd := dumpfmt.NewReader(r, len(j.tgt.spec.Columns))
	var total int64
	buf := j.tgt.spec.AppendInsertHead(nil)
	head := len(buf)
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		res, err := tx.ExecContext(ctx, string(buf))
		if err != nil {
			return err
		}
		a, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if t.generated != nil {
			// Not strict for this table: every statement's warnings are
			// looked at.
			if err := checkWarnings(ctx, tx, t, l.flavor); err != nil {
				return err
			}
		}
		total += a
		buf, n = buf[:head], 0
		return nil
	}
	for {
		vals, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = j.tgt.spec.AppendInsertRow(buf, vals)
		n++
		// Big rows end a statement early, to stay under max_allowed_packet.
		if n >= l.cfg.RowsPerStatement || len(buf) >= maxStatement {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return total, nil
}
