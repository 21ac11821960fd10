// Package dump reads a consistent snapshot of a source's tables over many
// connections at once. Tables are split into primary-key ranges (chunks) so
// one big table is read on every connection; each chunk is written as LOAD
// DATA text to a Sink: files in a directory (DirSink) or, for the streaming
// migration, a loader on the target.
package dump

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dumpfmt"
)

// Config says what to dump and how.
type Config struct {
	Source sluice.Endpoint
	// Threads is the number of source connections that share the snapshot.
	Threads int
	// RowsPerChunk is the approximate number of rows per key-range chunk.
	RowsPerChunk int
	// Select picks the tables to dump.
	Select func(sluice.TableRef) bool
	// PlanFor returns a chunk plan to reuse instead of planning (a resumed
	// migration must cut the same chunks as the interrupted one).
	PlanFor func(sluice.TableRef) (dumpfmt.Plan, bool)
	// Done reports chunks that are already loaded; they are not read.
	Done func(t sluice.TableRef, index int) bool
	// WholeTable, called when Run starts, names the tables whose chunks
	// must be read one table after another (every connection on the same
	// table): a loader that takes a whole table as one stream needs that
	// order. They are read first; chunks of the other tables are
	// interleaved, so parallel loaders work on different tables.
	WholeTable func(sluice.TableRef) bool
	// WholeWave is how many whole tables are read at once, chunks
	// interleaved: at most the number of loaders, so that every table
	// being read has a loader consuming it (1 if unset).
	WholeWave int
	// LockWait bounds the wait for FLUSH TABLES WITH READ LOCK, which
	// queues behind long-running statements.
	LockWait time.Duration
	// Log, if set, receives notes worth a line in the task's output (how
	// long the non-transactional tables were locked).
	Log *slog.Logger
	// RefusePreparedXA: replication follows the copy from the snapshot's
	// position, so the snapshot is refused while the source holds a
	// prepared XA transaction (ErrPreparedXA). A copy alone is consistent
	// without it.
	RefusePreparedXA bool
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Threads: 4, RowsPerChunk: 50000, LockWait: 60 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(f string, v any) error {
		return &sluice.Error{Op: "dump", Err: fmt.Errorf("%w: %s is %v", sluice.ErrConfig, f, v), Hint: "set " + f + " to a positive value"}
	}
	switch {
	case c.Source.Host == "" || c.Source.Port <= 0:
		return &sluice.Error{Op: "dump", Err: fmt.Errorf("%w: source endpoint is not set", sluice.ErrConfig), Hint: "set source.host and source.port"}
	case c.Threads < 1:
		return bad("threads", c.Threads)
	case c.RowsPerChunk < 1:
		return bad("rows-per-chunk", c.RowsPerChunk)
	case c.LockWait <= 0:
		return bad("lock wait", c.LockWait)
	}
	return nil
}

// TablePlan is one table of the snapshot with its chunks.
type TablePlan struct {
	Table  *sluice.Table
	Chunks []chunk.Range
	// Replanned is false when the plan came from Config.Plans.
	Replanned bool
	// EstRows and EstBytes are the server's estimates, for progress.
	EstRows, EstBytes int64
}

// Stats are live counters, safe to read while a dump runs.
type Stats struct {
	Rows, Bytes, Chunks atomic.Int64
	// TotalChunks is the number of chunks this run reads.
	TotalChunks atomic.Int64
}

// ChunkWriter receives one chunk's rows in LOAD DATA text. The dumper calls
// Commit with the row count after the last row, or Abort if reading failed;
// exactly one of them, once.
type ChunkWriter interface {
	Write(p []byte) (int, error)
	Commit(rows int64) error
	Abort(err error)
}

// Sink takes chunks. OpenChunk may be called from Threads goroutines at once.
type Sink interface {
	OpenChunk(ctx context.Context, t *sluice.Table, r chunk.Range) (ChunkWriter, error)
}
