package dump

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// Dumper holds a consistent snapshot open on Threads source connections.
// Open takes the snapshot and plans the chunks; Run reads them; Close ends
// the snapshot transactions. Run may be called once.
type Dumper struct {
	cfg     Config
	db      *sql.DB
	conns   []*sql.Conn
	pos     sluice.Position
	tables  []*TablePlan
	skipped bool // nothing left to copy: no snapshot was taken
	stats   Stats
	started time.Time
	// hold keeps the non-transactional tables still until they are read.
	hold nontxHold
}

// Open connects to the source, inspects the selected tables, takes the
// snapshot and plans chunks (reusing Config.Plans where given).
func Open(ctx context.Context, cfg Config) (_ *Dumper, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dumper{cfg: cfg, started: time.Now()}
	d.hold.log = cfg.Log
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	// The dumper stops reading a result set while the loader catches up, so
	// the server must not give up writing to a slow reader.
	d.db, err = dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: cfg.Threads + 3, // + the snapshot's control session and the non-transactional tables' lock
		Params:     map[string]string{"net_write_timeout": "86400", "net_read_timeout": "86400"},
		ReadBuffer: readBuffer})
	if err != nil {
		return nil, err
	}
	prepared, vanished := false, 0
	for attempt := 1; ; attempt++ {
		before, err := schemaDigest(ctx, d.db, cfg.Select)
		if err != nil {
			return nil, fmt.Errorf("dump: %w", dbconn.Classify(err, "source", cfg.Source))
		}
		// A table dropped or renamed between the list of tables and its
		// definition (or its size) is read again, from a new list: DDL
		// does not stop the copy before its snapshot (difftest seed 2040).
		// Such an attempt does not count against schemaAttempts.
		retry := func(err error) bool {
			if errors.Is(err, sluice.ErrUnknownTable) && vanished < maxVanished {
				vanished++
				attempt--
				return true
			}
			return false
		}
		if err := d.inspect(ctx); err != nil {
			if retry(err) {
				continue
			}
			return nil, err
		}
		if afterInspectHook != nil {
			afterInspectHook(attempt)
		}
		estimated := false
		if !prepared {
			if err := d.estimate(ctx); err != nil {
				if retry(err) {
					continue
				}
				return nil, err
			}
			estimated = true
			if d.nothingLeft() {
				// A rerun after a complete copy: no snapshot, so no FLUSH
				// TABLES WITH READ LOCK that would stall the source's
				// writers for nothing. Position stays empty: the loader
				// keeps the first run's.
				d.skipped = true
				return d, nil
			}
			for i := 0; i < cfg.Threads; i++ {
				c, err := d.db.Conn(ctx)
				if err != nil {
					return nil, dbconn.Classify(err, "source", cfg.Source)
				}
				d.conns = append(d.conns, c)
				// The snapshot holds every table it copies (see
				// takeSnapshot), so a read never waits for a metadata
				// lock; if one ever does, it fails after a short wait
				// instead of stalling the source's writers of the table.
				if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", ddlWaitSecs)); err != nil {
					return nil, dbconn.Classify(err, "source", cfg.Source)
				}
			}
			prepared = true
		}
		unchanged := func(ctl *sql.Conn) (bool, error) {
			now, err := schemaDigest(ctx, ctl, cfg.Select)
			return err == nil && sameSchema(before, now), err
		}
		if attempt == schemaAttempts {
			// DDL keeps coming: read the tables under the lock, which
			// holds DDL off too. The source's writers wait for that
			// long, but the snapshot is certain to match.
			unchanged = func(*sql.Conn) (bool, error) { return true, d.inspect(ctx) }
		}
		pin := func() []sluice.TableRef {
			refs := make([]sluice.TableRef, len(d.tables))
			for i, tp := range d.tables {
				refs[i] = tp.Table.Ref
			}
			return refs
		}
		underLock := func(ctl *sql.Conn) error {
			refs := pin()
			nt, err := schema.NonTransactional(ctx, ctl, refs) // under the global read lock: the snapshot's engines
			if err != nil {
				return err
			}
			var held []sluice.TableRef
			for _, r := range refs {
				if nt[r] {
					held = append(held, r)
				}
			}
			return d.hold.lock(ctx, d.db, held, cfg.LockWait)
		}
		var xaRefused error
		if cfg.RefusePreparedXA {
			unchanged = refusePreparedXA(ctx, cfg, unchanged, &xaRefused) // xa.go
		}
		d.pos, err = takeSnapshot(ctx, d.db, d.conns, cfg, unchanged, pin, underLock)
		if xaRefused != nil {
			return nil, xaRefused
		}
		if errors.Is(err, errSchemaChanged) && attempt < schemaAttempts {
			continue // a DDL ran since the tables were read: read them again
		}
		if err != nil {
			return nil, err
		}
		if !estimated {
			// The estimates are only for progress; the tables may differ now.
			if err := d.estimate(ctx); err != nil {
				return nil, err
			}
		}
		break
	}
	if err := d.plan(ctx); err != nil {
		return nil, err
	}
	for _, c := range d.conns {
		// Raw stored bytes: no character set conversion can alter a value.
		if _, err := c.ExecContext(ctx, "SET SESSION character_set_results = binary"); err != nil {
			return nil, dbconn.Classify(err, "source", cfg.Source)
		}
	}
	return d, nil
}

// ErrChangedAfterSnapshot is a read in the snapshot that failed because of
// a DDL on its table after the snapshot was taken: one that ran before the
// table was first read (the snapshot cannot read it any more), or one that
// waits for the snapshot to end. Chunks already loaded stay valid; the
// rest must come from a new snapshot.
var ErrChangedAfterSnapshot = errors.New("a DDL on the source changed the table after the snapshot was taken")

// ddlWaitSecs bounds how long a read in the snapshot waits for a table's
// metadata lock (lock_wait_timeout): only a DDL holds one against it.
const ddlWaitSecs = 3

// ddlError returns the error of a read in the snapshot that a DDL made
// fail, or nil when err is something else.
func ddlError(op string, err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return nil
	}
	var why string
	switch me.Number {
	case 1412, 1054, 1146: // table definition has changed, unknown column, no such table
		why = me.Message
	case 1205: // lock wait timeout: a consistent read takes no row lock
		why = fmt.Sprintf("a DDL waits for the snapshot to end (a read waited %d s for the table's metadata lock)", ddlWaitSecs)
	default:
		return nil
	}
	return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %w: %s", sluice.ErrSchemaMismatch, ErrChangedAfterSnapshot, why),
		Hint: "run the same command again: chunks already loaded are kept and the rest is read from a new snapshot"}
}

// afterInspectHook, set by tests, runs after the tables are read and before
// the snapshot (attempt counts from 1).
var afterInspectHook func(attempt int)

// schemaAttempts bounds how often the tables are read before the snapshot
// only to find that a DDL changed them; the last attempt reads them under
// the snapshot's lock.
const schemaAttempts = 3

// maxVanished bounds the rereads of the table list because a table went
// away while it was read (a DROP or RENAME each time).
const maxVanished = 20

// inspect reads the selected tables' definitions.
func (d *Dumper) inspect(ctx context.Context) error {
	refs, err := schema.ListTables(ctx, d.db, d.cfg.Select)
	if err != nil {
		return fmt.Errorf("dump: list tables: %w", dbconn.Classify(err, "source", d.cfg.Source))
	}
	d.tables = d.tables[:0]
	for _, ref := range refs {
		t, err := schema.Inspect(ctx, d.db, ref)
		if err != nil {
			err = dbconn.Classify(err, "source", d.cfg.Source)
		}
		if errors.Is(err, sluice.ErrUnknownTable) {
			// Dropped or renamed since it was listed, before or during its
			// inspection (SHOW CREATE TABLE after the columns: difftest
			// seed 2040): the digest check catches it.
			continue
		}
		if err != nil {
			return fmt.Errorf("dump: %w", err)
		}
		d.tables = append(d.tables, &TablePlan{Table: t})
	}
	return nil
}

// nothingLeft reports whether every selected table has a stored plan whose
// chunks are all done, so no chunk needs to be read.
func (d *Dumper) nothingLeft() bool {
	if len(d.tables) == 0 || d.cfg.PlanFor == nil || d.cfg.Done == nil {
		return false
	}
	for _, tp := range d.tables {
		p, ok := d.cfg.PlanFor(tp.Table.Ref)
		if !ok {
			return false
		}
		rs := p.Ranges()
		if planFits(tp.Table, rs) != nil {
			return false // plan() says why
		}
		for _, r := range rs {
			if !d.cfg.Done(tp.Table.Ref, r.Index) {
				return false
			}
		}
		tp.Chunks = rs
	}
	return true
}

// NoSnapshot reports that Open found nothing left to copy and took no
// snapshot (Position is empty).
func (d *Dumper) NoSnapshot() bool { return d.skipped }

// Position is the binlog position (and GTID set) of the snapshot.
func (d *Dumper) Position() sluice.Position { return d.pos }

// Tables are the snapshot's tables with their chunk plans, sorted by name.
func (d *Dumper) Tables() []*TablePlan { return d.tables }

// Stats are live counters.
func (d *Dumper) Stats() *Stats { return &d.stats }

// Close ends the snapshot and closes the connections.
func (d *Dumper) Close() error {
	d.hold.release()
	for _, c := range d.conns {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		c.Close()
	}
	d.conns = nil
	if d.db != nil {
		return d.db.Close()
	}
	return nil
}

func (d *Dumper) estimate(ctx context.Context) error {
	for _, tp := range d.tables {
		var rows, bytes sql.NullInt64
		err := d.db.QueryRowContext(ctx, `SELECT TABLE_ROWS, DATA_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
			tp.Table.Ref.Schema, tp.Table.Ref.Name).Scan(&rows, &bytes)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dbconn.Classify(err, "source", d.cfg.Source)
		}
		tp.EstRows, tp.EstBytes = rows.Int64, bytes.Int64
	}
	return nil
}

// plan cuts chunks inside the snapshot, one table per connection at a time.
func (d *Dumper) plan(ctx context.Context) error {
	todo := make(chan *TablePlan, len(d.tables))
	for _, tp := range d.tables {
		if d.cfg.PlanFor != nil {
			if p, ok := d.cfg.PlanFor(tp.Table.Ref); ok {
				rs := p.Ranges()
				if err := planFits(tp.Table, rs); err != nil {
					return err
				}
				tp.Chunks = rs
				continue
			}
		}
		tp.Replanned = true
		todo <- tp
	}
	close(todo)
	errs := make([]error, len(d.conns))
	var wg sync.WaitGroup
	for i, c := range d.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range todo {
				if errs[i] != nil {
					continue
				}
				var q chunk.Querier = c
				if d.hold.held(tp.Table.Ref) {
					q = highPriority{c}
				}
				rs, err := chunk.Plan(ctx, q, tp.Table, d.cfg.RowsPerChunk)
				if err != nil {
					if err := ddlError("dump: plan "+tp.Table.Ref.String(), err); err != nil {
						errs[i] = err
						continue
					}
					errs[i] = fmt.Errorf("dump: %w", dbconn.Classify(err, "source", d.cfg.Source))
					continue
				}
				tp.Chunks = rs
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type job struct {
	tp *TablePlan
	r  chunk.Range
}

// jobs lists the chunks to read, interleaving tables so that parallel
// loaders write to different tables (and different index pages) at once.
func (d *Dumper) jobs() []job {
	var out []job
	todo := func(tp *TablePlan, r chunk.Range) bool {
		return d.cfg.Done == nil || !d.cfg.Done(tp.Table.Ref, r.Index)
	}
	whole := func(tp *TablePlan) bool { return d.cfg.WholeTable != nil && d.cfg.WholeTable(tp.Table.Ref) }
	interleave := func(tables []*TablePlan) {
		for i := 0; ; i++ {
			more := false
			for _, tp := range tables {
				if i >= len(tp.Chunks) {
					continue
				}
				more = true
				if r := tp.Chunks[i]; todo(tp, r) {
					out = append(out, job{tp, r})
				}
			}
			if !more {
				return
			}
		}
	}
	// The non-transactional tables first: their writers wait until they
	// are read (see nontx.go).
	for _, held := range []bool{true, false} {
		var wholes, rest []*TablePlan
		for _, tp := range d.tables {
			switch {
			case d.hold.held(tp.Table.Ref) != held:
			case whole(tp):
				wholes = append(wholes, tp)
			default:
				rest = append(rest, tp)
			}
		}
		// Whole tables in waves: a wave's tables each get a loader, and the
		// next wave starts when every chunk of this one is handed out.
		wave := max(d.cfg.WholeWave, 1)
		for len(wholes) > 0 {
			n := min(wave, len(wholes))
			interleave(wholes[:n])
			wholes = wholes[n:]
		}
		interleave(rest)
	}
	return out
}

// Run reads every chunk not yet done into sink, on all connections. The
// first error stops the other workers and is returned.
func (d *Dumper) Run(ctx context.Context, sink Sink) error {
	jobs := d.jobs()
	d.stats.TotalChunks.Store(int64(len(jobs)))
	held := 0
	for _, j := range jobs {
		if d.hold.held(j.tp.Table.Ref) {
			held++
		}
	}
	d.hold.start(held)
	defer d.hold.release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan job)
	var wg sync.WaitGroup
	for _, c := range d.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := d.dumpChunk(ctx, c, j, sink); err != nil {
					cancel(err)
					for range ch {
					}
					return
				}
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// planFits checks that a stored plan's bounds fit the table's key as the
// new snapshot sees it. A plan cut on a key that a DDL dropped or changed
// while the copy was stopped cannot select the table's rows (the bounds
// name other columns; a dropped key made the read panic), and a new plan's
// chunks would not line up with the chunks already loaded, so the table
// is refused with the way out.
func planFits(t *sluice.Table, rs []chunk.Range) error {
	n := len(chunk.KeyColumns(t))
	for _, r := range rs {
		if (r.Lo != nil && len(r.Lo) != n) || (r.Hi != nil && len(r.Hi) != n) || (n == 0 && len(rs) > 1) {
			return &sluice.Error{Op: "dump: resume " + t.Ref.String(), Err: fmt.Errorf("%w: %w: the key the interrupted copy cut its chunks on is not the table's key now", sluice.ErrSchemaMismatch, ErrChangedAfterSnapshot),
				Hint: "copy this table again whole: with the task stopped, drop it on the target and delete its rows from sluice_meta.load_checkpoint (task and table), then run the same command; or exclude it"}
		}
	}
	return nil
}

// selectSQL reads a chunk's writable columns in key order.
func selectSQL(t *sluice.Table, r chunk.Range) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, ci := range t.WritableColumns() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dumpfmt.SelectExpr(t.Columns[ci]))
	}
	where, args := r.Where(t)
	b.WriteString(" FROM " + t.Ref.Quoted() + " WHERE " + where)
	if t.HasKey() {
		b.WriteString(" ORDER BY " + sqlgen.ColumnList(chunk.KeyColumns(t)))
	}
	return b.String(), args
}

const flushSize = 256 << 10

// blockWriter is a ChunkWriter that takes the rows' buffer itself instead
// of a copy (the stream's pipe): Block gives an empty buffer to fill,
// WriteBlock hands it over, and the writer never touches it again.
type blockWriter interface {
	Block() []byte
	WriteBlock(b []byte) error
}

// readBuffer is each source connection's read buffer: the rows arrive in
// reads of up to this size instead of the driver's 4 KiB.
const readBuffer = 256 << 10

func (d *Dumper) dumpChunk(ctx context.Context, c *sql.Conn, j job, sink Sink) error {
	t := j.tp.Table
	query, args := selectSQL(t, j.r)
	if d.hold.held(t.Ref) {
		query = withHighPriority(query)
	}
	w, err := sink.OpenChunk(ctx, t, j.r)
	if err != nil {
		return err
	}
	var rows, counted int64
	err = c.Raw(func(dc any) error {
		// The driver level keeps NULL (nil) apart from an empty value
		// (non-nil, zero length); database/sql's RawBytes does not.
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return errors.New("driver cannot query")
		}
		named := make([]driver.NamedValue, len(args))
		for i, a := range args {
			named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		rs, err := qc.QueryContext(ctx, query, named)
		if err != nil {
			return err
		}
		defer rs.Close()
		dest := make([]driver.Value, len(rs.Columns()))
		bw, _ := w.(blockWriter)
		var buf []byte
		if bw != nil {
			buf = bw.Block()
		} else {
			buf = make([]byte, 0, flushSize+64<<10)
		}
		flush := func(last bool) error {
			n := len(buf)
			if bw != nil {
				if err := bw.WriteBlock(buf); err != nil {
					return err
				}
				buf = nil
				if !last {
					buf = bw.Block()
				}
			} else {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			d.stats.Bytes.Add(int64(n))
			return nil
		}
		for {
			if err := rs.Next(dest); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			// Straight into the buffer, value by value: the []byte values
			// point into the driver's read buffer, valid until Next.
			for i, v := range dest {
				if i > 0 {
					buf = append(buf, '\t')
				}
				buf = dumpfmt.AppendValue(buf, v)
			}
			buf = append(buf, '\n')
			rows++
			if len(buf) >= flushSize {
				if err := flush(false); err != nil {
					return err
				}
				d.stats.Rows.Add(rows - counted)
				counted = rows
			}
		}
		if len(buf) > 0 {
			return flush(true)
		}
		return nil
	})
	if err == nil && d.hold.held(t.Ref) {
		d.hold.chunkRead()
	}
	if err != nil {
		w.Abort(err)
		var se *sluice.Error
		if errors.As(err, &se) {
			return err
		}
		if err := ddlError(fmt.Sprintf("dump %s chunk %d", t.Ref, j.r.Index), err); err != nil {
			return err
		}
		return fmt.Errorf("dump %s chunk %d: %w", t.Ref, j.r.Index, dbconn.Classify(err, "source", d.cfg.Source))
	}
	if err := w.Commit(rows); err != nil {
		return err
	}
	d.stats.Rows.Add(rows - counted)
	d.stats.Chunks.Add(1)
	return nil
}
