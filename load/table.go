package load

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-db/sluice/internal/dbconn"
)

// tableJob is one table's remaining chunks, loaded as one stream in one
// transaction (CommitTable, or CommitAuto for a table small enough). Chunks arrive in the order they are opened;
// their order inside the stream does not matter because their key ranges
// are disjoint.
type tableJob struct {
	tgt  *target
	n    int
	next chan *job
}

// addToTable hands chunk j to its table's job, queueing the table for a
// loader when its first chunk arrives.
func (l *Loader) addToTable(ctx context.Context, j *job) error {
	t := j.tgt
	t.tjOnce.Do(func() {
		t.tj = &tableJob{tgt: t, n: t.pending, next: make(chan *job, max(t.pending, 1))}
		t.tjErr = l.enqueue(ctx, &job{table: t.tj, tgt: t})
	})
	if t.tjErr != nil {
		return t.tjErr
	}
	select {
	case t.tj.next <- j:
		return nil
	default:
		return fmt.Errorf("load %s: more chunks than planned (%d)", t.ref, t.tj.n)
	}
}

// seqReader reads the chunks of a table job one after another.
type seqReader struct {
	ctx  context.Context
	tj   *tableJob
	cur  io.Reader
	got  []*job
	stat *Stats
	// sentRows and sentChunks are what this reader added to the stats'
	// in-flight counters, taken back when the transaction ends.
	sentRows, sentChunks int64
}

// chunkSent counts a chunk the target has received in full.
func (s *seqReader) chunkSent() {
	if rows, err := s.got[len(s.got)-1].rows(); err == nil {
		s.sentRows += rows
		s.sentChunks++
		s.stat.InFlightRows.Add(rows)
		s.stat.InFlightChunks.Add(1)
	}
}

// settle takes this reader's in-flight counts back (its transaction
// committed, and Rows and Chunks count it now, or it rolled back).
func (s *seqReader) settle() {
	s.stat.InFlightRows.Add(-s.sentRows)
	s.stat.InFlightChunks.Add(-s.sentChunks)
	s.sentRows, s.sentChunks = 0, 0
}

func (s *seqReader) Read(p []byte) (int, error) {
	for {
		if s.cur == nil {
			if len(s.got) == s.tj.n {
				return 0, io.EOF
			}
			var j *job
			select {
			case j = <-s.tj.next:
			case <-s.ctx.Done():
				return 0, context.Cause(s.ctx)
			}
			r, err := j.open()
			if err != nil {
				return 0, err
			}
			s.got = append(s.got, j)
			s.cur = r
		}
		n, err := s.cur.Read(p)
		s.stat.Bytes.Add(int64(n))
		if err == io.EOF {
			if c, ok := s.cur.(io.Closer); ok {
				c.Close()
			}
			s.cur = nil
			s.chunkSent()
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

// runTable loads a whole table job in one transaction: one LOAD DATA (or
// the INSERT path) over all chunks, then every chunk's checkpoint row.
func (l *Loader) runTable(ctx context.Context, tj *job) (err error) {
	t := tj.table
	l.stats.markStart()
	sr := &seqReader{ctx: ctx, tj: t, stat: &l.stats}
	defer sr.settle()
	defer func() {
		if err == nil {
			return
		}
		// Unblock every dump worker still writing to this table.
		if c, ok := sr.cur.(io.Closer); ok {
			c.Close()
		}
		for _, j := range sr.got {
			if j.pipe != nil {
				j.pipe.closeRead(err)
			}
		}
	}()
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return dbconn.Classify(err, "target", l.cfg.Target)
	}
	defer conn.Close()
	// A session a failure left lenient must not load another table.
	defer func() {
		if err != nil && t.tgt.generated != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	// With both checks off, the first insert into an empty table in a
	// transaction takes InnoDB's bulk path. Only into an empty table: into
	// one holding rows of an earlier run, rows of two snapshots may collide
	// on a unique key, and that must fail rather than slip through. The
	// checkpoint rows get unique checks back before they are written (see
	// below), and the pooled session after the transaction.
	if !t.tgt.started {
		if _, err = conn.ExecContext(ctx, "SET SESSION unique_checks = 0"); err != nil {
			return l.classify(err)
		}
		defer func() {
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION unique_checks = 1"); rerr != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return dbconn.Classify(err, "target", l.cfg.Target)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var loaded int64
	if err = lenient(ctx, tx, t.tgt); err != nil {
		return l.chunkErr(tj, err)
	}
	if l.cfg.RowsPerStatement == 0 {
		loaded, err = l.loadData(ctx, tx, t.tgt, tj, sr)
	} else {
		loaded, err = l.insertRows(ctx, tx, t.tgt, tj, sr)
	}
	if err == nil {
		err = strict(ctx, tx, t.tgt)
	}
	if err != nil {
		return l.chunkErr(tj, err)
	}
	var want int64
	rows := make([]int64, len(sr.got))
	for i, j := range sr.got {
		if rows[i], err = j.rows(); err != nil {
			return fmt.Errorf("load %s chunk %d: %w", t.tgt.ref, j.index, err)
		}
		want += rows[i]
	}
	if loaded != want || len(sr.got) != t.n {
		return fmt.Errorf("load %s: %d rows written from %d chunks, %d rows in %d chunks expected (a duplicate key or a rejected value); the table's load was rolled back", t.tgt.ref, loaded, len(sr.got), want, t.n)
	}
	if !t.tgt.started {
		// The checkpoint rows go in row by row, not by the bulk path: into
		// an empty load_checkpoint (a task's first chunks on a fresh
		// target) that path takes a table X lock after the statement's IX
		// lock, and two tables loaded whole at once, each holding IX and
		// waiting for X, deadlock (Error 1213; the CI flake of
		// TestRerunWaitsForKilledRunsLastChunk). It would also hold every
		// other loader's checkpoint back until this commit. The rows loaded
		// above keep their bulk path.
		if _, err = tx.ExecContext(ctx, "SET SESSION unique_checks = 1"); err != nil {
			return l.chunkErr(tj, err)
		}
	}
	if len(sr.got) > 0 {
		var q strings.Builder
		var args []any
		q.WriteString(strings.TrimSuffix(l.meta.checkpointSQL(), " VALUES (?, ?, ?, ?, ?, ?)") + " VALUES ")
		for i, j := range sr.got {
			if i > 0 {
				q.WriteString(", ")
			}
			// Bytes per chunk are not tracked apart inside one stream.
			q.WriteString("(?, ?, ?, ?, 0, ?)")
			args = append(args, l.cfg.Task, t.tgt.key, j.index, rows[i], l.snap)
		}
		if _, err = tx.ExecContext(ctx, q.String(), args...); err != nil {
			return l.chunkErr(tj, err)
		}
	}
	if l.cfg.ChunkDelay > 0 {
		select {
		case <-time.After(l.cfg.ChunkDelay):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err = tx.Commit(); err != nil {
		return l.chunkErr(tj, err)
	}
	l.stats.Rows.Add(loaded)
	l.stats.Chunks.Add(int64(len(sr.got)))
	tj.tgt.done.Add(int64(len(sr.got)))
	l.stats.markEnd()
	return nil
}
