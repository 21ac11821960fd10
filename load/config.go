// Package load writes chunks of LOAD DATA text into a target over a pool of
// connections. Each chunk is loaded in one transaction together with its
// checkpoint row in sluice_meta, so after any interruption (kill -9
// included) a chunk is either wholly loaded and marked done, or absent and
// not marked: a rerun loads exactly the chunks that are missing.
package load

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
)

// Config says where and how to load.
type Config struct {
	Target sluice.Endpoint
	// Task keys the checkpoints: chunks done under another task name are
	// not this load's.
	Task string
	// PoolSize is the number of target connections loading at once.
	PoolSize int
	// RowsPerStatement is 0 for LOAD DATA LOCAL INFILE, or the number of
	// rows per multi-row INSERT.
	RowsPerStatement int
	// Route maps a source table to its target name.
	Route func(sluice.TableRef) sluice.TableRef
	// MetaSchema holds the checkpoint tables on the target.
	MetaSchema string
	// StreamBuffer bounds the bytes a streamed chunk buffers in memory
	// before the dump side waits for the loader.
	StreamBuffer int
	// StreamMemory bounds the bytes all streamed chunks buffer together.
	StreamMemory int
	// DisableBinlog sets sql_log_bin=0 in load sessions (needs SUPER or
	// BINLOG ADMIN); off by default so the target's replicas see the data.
	DisableBinlog bool
	// CommitUnit is CommitAuto, CommitChunk or CommitTable (see each).
	CommitUnit string
	// BulkMaxChunks is the largest table (in chunks) CommitAuto loads as
	// one transaction: it bounds the work an interruption can lose.
	BulkMaxChunks int
	// ReloadMixed is set when replication continues from the copy
	// (migrate --mode all). A resumed run reads its chunks from a new
	// snapshot; replication can match a table's changes to chunks of
	// different snapshots only when the table has an integer primary key
	// and no other unique key (see internal/snapfilter). Any other table
	// that an earlier run left partly loaded is emptied and loaded whole
	// from the new snapshot.
	ReloadMixed bool
	// ChunkDelay sleeps inside each chunk's transaction before commit. It
	// exists for the interruption tests, which need a run to be slow.
	ChunkDelay time.Duration
}

// Commit units.
const (
	// CommitChunk commits every chunk on its own: any number of loaders
	// share a table, and an interrupted run loses at most the chunks in
	// flight.
	CommitChunk = "chunk"
	// CommitTable loads each table's remaining chunks with one LOAD DATA
	// statement in one transaction, with unique_checks=0 and
	// foreign_key_checks=0. Into an empty table MariaDB 10.6+ then uses its
	// bulk insert path (sorted index build, no per-row undo), which costs
	// the server about a third of the row-by-row path. One loader per
	// table; an interrupted run loses the tables in flight (their rollback
	// is instant), never a committed one.
	CommitTable = "table"
	// CommitAuto loads a table like CommitTable when nothing of it is
	// loaded yet and it has at most BulkMaxChunks chunks, and like
	// CommitChunk otherwise: small and medium tables get the fast bulk
	// path, big ones keep fine-grained resume and parallel loaders.
	CommitAuto = "auto"
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Task: "task", PoolSize: 8, MetaSchema: "sluice_meta", StreamBuffer: 16 << 20, StreamMemory: 128 << 20, CommitUnit: CommitAuto, BulkMaxChunks: 64}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(f string, v any) error {
		return &sluice.Error{Op: "load", Err: fmt.Errorf("%w: %s is %v", sluice.ErrConfig, f, v), Hint: "set " + f + " to a valid value"}
	}
	switch {
	case c.Target.Host == "" || c.Target.Port <= 0:
		return &sluice.Error{Op: "load", Err: fmt.Errorf("%w: target endpoint is not set", sluice.ErrConfig), Hint: "set target.host and target.port"}
	case c.Task == "" || len(c.Task) > 255:
		return bad("task name", fmt.Sprintf("%q", c.Task))
	case c.PoolSize < 1:
		return bad("pool-size", c.PoolSize)
	case c.RowsPerStatement < 0:
		return bad("rows-per-statement", c.RowsPerStatement)
	case c.MetaSchema == "":
		return bad("meta schema", `""`)
	case c.StreamBuffer < 1<<16:
		return bad("stream buffer", c.StreamBuffer)
	case c.StreamMemory < c.StreamBuffer:
		return bad("stream memory", c.StreamMemory)
	case c.CommitUnit != CommitChunk && c.CommitUnit != CommitTable && c.CommitUnit != CommitAuto:
		return bad("commit unit", fmt.Sprintf("%q (auto, chunk or table)", c.CommitUnit))
	case c.BulkMaxChunks < 0:
		return bad("bulk max chunks", c.BulkMaxChunks)
	}
	return nil
}

// Stats are live counters, safe to read while a load runs.
type Stats struct {
	Rows, Bytes, Chunks atomic.Int64
	// TotalChunks is the number of chunks this run loads (set by Prepare).
	TotalChunks atomic.Int64
	// Skipped counts chunks already done by an earlier run.
	Skipped atomic.Int64
	// InFlightRows and InFlightChunks count what a whole-table load
	// (commit unit table) has streamed to the target and not yet
	// committed: a progress display adds them to Rows and Chunks, which
	// count only committed work, so a table loaded in one transaction does
	// not show 0 rows and 0% until its commit (issue 30).
	InFlightRows, InFlightChunks atomic.Int64
	// first and last bracket the time the pool spent loading, in unix nanos.
	first, last atomic.Int64
}

// Active is the time from the first chunk started to the last committed.
func (s *Stats) Active() time.Duration {
	f, l := s.first.Load(), s.last.Load()
	if f == 0 || l < f {
		return 0
	}
	return time.Duration(l - f)
}

func (s *Stats) markStart() {
	s.first.CompareAndSwap(0, time.Now().UnixNano())
}

func (s *Stats) markEnd() { s.last.Store(time.Now().UnixNano()) }
