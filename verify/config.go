// Package verify proves that a target holds the same rows as its source. It
// splits each table into primary-key ranges (the same plan dump uses), has
// both servers compute a count and an order-independent checksum of every
// range, and drills into ranges that differ to name each key that is
// missing on the target, extra on the target, or different.
//
// verify compares two static pictures. On a pair that is still replicating,
// rows in flight show up as transient differences; wait for the replica to
// catch up (or stop writes) before trusting a difference.
package verify

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
)

// Config tunes a verification run.
type Config struct {
	// Threads is how many chunks are checked at once. Each uses one
	// connection on the source and one on the target.
	Threads int
	// RowsPerChunk is the approximate size of a key range. Smaller chunks
	// make drill-down cheaper; larger ones mean fewer round trips.
	RowsPerChunk int
	// MaxDiffs is how many differing keys are kept per table (in key order);
	// the counts of missing, extra and different rows are always complete.
	MaxDiffs int
	// MaxKeylessRows bounds the row-by-row comparison of tables without a
	// key: such a table is diffed by a multiset of row hashes held in
	// memory, which is skipped above this many source rows (the table is
	// then only reported as different).
	MaxKeylessRows int
	// Rechecks is how many more times a chunk whose checksums differ is
	// checksummed again, RecheckDelay apart, before it is drilled into and
	// reported. 0 (the default) suits a static pair; a few rechecks let a
	// pair that has just caught up with replication settle.
	Rechecks     int
	RecheckDelay time.Duration
	// Route maps a source table to its name on the target; nil keeps the
	// name. Pass task.Config.Route to follow a task's routes.
	Route func(sluice.TableRef) sluice.TableRef

	// Progress, when set, is updated as the run goes, for a progress display.
	Progress *Progress

	// hook lets tests act at a point of a chunk's check ("recheck": before
	// a recheck's delay; "drill": before a drill-down), deterministically.
	hook func(point string, source sluice.TableRef, chunk int)
}

// DefaultConfig returns the defaults: 4 threads, chunks of 10,000 rows and
// up to 100 differing keys per table.
func DefaultConfig() Config {
	return Config{Threads: 4, RowsPerChunk: 10000, MaxDiffs: 100, MaxKeylessRows: 1000000, RecheckDelay: time.Second}
}

// Validate names the first field that is out of range.
func (c Config) Validate() error {
	bad := func(field, msg string) error {
		return &sluice.Error{Op: "verify config", Err: fmt.Errorf("%w: %s %s", sluice.ErrConfig, field, msg), Hint: "set " + field + " to a valid value"}
	}
	switch {
	case c.Threads < 1 || c.Threads > 256:
		return bad("threads", fmt.Sprintf("is %d (1-256)", c.Threads))
	case c.RowsPerChunk < 1:
		return bad("rows-per-chunk", fmt.Sprintf("is %d (must be positive)", c.RowsPerChunk))
	case c.MaxDiffs < 0:
		return bad("max-diffs", fmt.Sprintf("is %d (0 or more)", c.MaxDiffs))
	case c.MaxKeylessRows < 0:
		return bad("max-keyless-rows", fmt.Sprintf("is %d (0 or more)", c.MaxKeylessRows))
	case c.Rechecks < 0 || c.Rechecks > 100:
		return bad("rechecks", fmt.Sprintf("is %d (0-100)", c.Rechecks))
	case c.RecheckDelay < 0:
		return bad("recheck-delay", fmt.Sprintf("is %s (0 or more)", c.RecheckDelay))
	}
	return nil
}

func (c Config) route(t sluice.TableRef) sluice.TableRef {
	if c.Route == nil {
		return t
	}
	return c.Route(t)
}

func (c Config) at(point string, source sluice.TableRef, chunk int) {
	if c.hook != nil {
		c.hook(point, source, chunk)
	}
}

// Progress counts a run's work. Its counters may be read at any time while
// Run updates them. ChunksPlanned grows as tables are planned, so
// Chunks/ChunksPlanned is a lower bound of the work left only once
// TablesPlanned has reached the number of tables.
type Progress struct {
	TablesPlanned atomic.Int64
	ChunksPlanned atomic.Int64
	Chunks        atomic.Int64 // chunks checked
	DiffChunks    atomic.Int64 // chunks checked that differ
	Rows          atomic.Int64 // source rows checked
}
