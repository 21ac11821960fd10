// Package apply writes the decoded replication stream to the target. A
// scheduler computes each transaction's writeset (primary and unique key
// values per table) and runs transactions whose writesets do not conflict
// on different connections at the same time, whatever commit grouping the
// source used. Consecutive small transactions are grouped into one target
// transaction (Batch) with consecutive INSERTs merged into multi-row
// statements; target transactions commit in source order; and each one
// writes the replication checkpoint in the same transaction as its data, so
// a restart after kill -9 neither loses nor repeats a source transaction.
//
// With RelaxedOrder, groups that do not conflict commit as soon as they are
// applied, and the checkpoint records which groups past the low-water mark
// are committed (relaxed.go).
//
// Wiring (see replicate/ and apply/pipeline_test.go):
//
//	db, _ := apply.OpenTarget(ctx, target, cfg.Workers)
//	a, _ := apply.New(cfg, db)
//	a.Seed(ctx, startPos, trackerSnapshot) // new task only; no-op once a checkpoint exists
//	a.Start(ctx)                           // fences a killed predecessor, then reads the checkpoint
//	pos, _, _ := a.Checkpoint(ctx)         // resume reading the source here
//	state, _ := a.SchemaState(ctx)         // restore the decoder's schema tracker from it
//	for each event: items, err := dec.Feed(ev, pos)
//	    on err: a.Flush(ctx), then stop (unsupported DDL pauses the task)
//	    for each item: a.Submit(ctx, item) // an error means: Close, restart from Checkpoint
//	a.Stats().Applied                      // for relay purge, status and lag
//	a.Close()
package apply

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/fence"
)

// Config tunes the applier.
type Config struct {
	// Task names the checkpoint rows; one target may serve many tasks.
	Task string
	// Workers is the number of target connections applying in parallel
	// (task file: incremental.worker-count).
	Workers int
	// Batch is the most source transactions grouped into one target
	// transaction (incremental.batch) while target commits are fast.
	// Groups close early when the input runs dry, so a caught-up stream is
	// applied with low latency.
	Batch int
	// MaxBatch bounds how far groups grow when target commits are slow.
	// With source-order commit every group's COMMIT waits for the one
	// before it, so throughput is bounded by about group size / commit
	// round trip: the applier measures the COMMIT round trips and grows
	// the group size in proportion (Batch at a 2 ms commit, up to
	// MaxBatch). BatchBytes still bounds each group. A MaxBatch at or below
	// Batch turns the growth off.
	MaxBatch int
	// ChainBatch bounds how far a group grows while dispatching it would
	// only wait (behind a worker whose channel is full, or for the groups
	// of two workers; chain.go): growing it then costs no latency, and
	// under a write hot spot, where the groups run one after another, the
	// group size is what each of those serial target transactions' round
	// trips is paid for. BatchBytes still bounds each group. At or below
	// MaxBatch, such groups stop at MaxBatch.
	ChainBatch int
	// ChainBytes bounds, like BatchBytes, the size of such a group (the
	// estimate of its row changes): past BatchBytes it grows on only while
	// it would wait. sysbench's write_only transactions reach BatchBytes at
	// about 2,400; at +20 ms to the target those groups ran one after
	// another a round trip each, and the scheduler blocked behind them with
	// its group full (issue 18). At or below BatchBytes it is off. The SQL
	// text of one round trip stays bounded by BatchBytes.
	ChainBytes int
	// RelaxedOrder lets groups that do not conflict commit out of source
	// order (incremental.commit-order: relaxed). Each group then costs one
	// round trip on its own connection and nothing waits for the group
	// before it; a reader of the target may see a later source transaction
	// before an earlier one. Exactly-once holds: see relaxed.go.
	RelaxedOrder bool
	// BatchBytes bounds the SQL text sent in one round trip and the size of
	// one target transaction group (one that would only wait: ChainBytes).
	BatchBytes int
	// LargeTxnBytes is the size (estimated from row values) at which a
	// source transaction stops being held in memory and is streamed to the
	// target as it is read, alone, in one target transaction.
	LargeTxnBytes int
	// MetaSchema holds the checkpoint tables on the target.
	MetaSchema string
	// Queue is how many stream items Submit buffers before it blocks.
	Queue int
	// LockWaitTimeout is the target session's innodb_lock_wait_timeout.
	// Lock waits between workers that the writesets cannot see (locks on
	// neighbouring unique index entries, foreign keys) are broken by the
	// lock monitor (lockwait.go) well before it; the timeout is the last
	// resort, after which the task restarts from its checkpoint.
	LockWaitTimeout time.Duration
	// OnMissingRow is what an UPDATE or DELETE that matches no target row
	// does (incremental.on-missing-row): "stop" (the default, like a
	// MariaDB replica's error 1032) rolls the target transaction back and
	// stops with an error naming the table, key and source transaction;
	// "skip" commits the transaction without that row change and counts it
	// (Stats.MissingRows).
	OnMissingRow string
	// Notify, when set, receives one line for each event the task's log
	// should show (a non-transactional group replayed after a crash,
	// nontxreplay.go). Not part of the task's settings.
	Notify func(format string, args ...any) `yaml:"-" json:"-"`
}

// Values of Config.OnMissingRow.
const (
	MissingRowStop = "stop"
	MissingRowSkip = "skip"
)

// DefaultConfig returns the defaults (the task file's defaults for workers and batch).
func DefaultConfig() Config {
	return Config{
		Task:            "task",
		Workers:         16,
		Batch:           100,
		MaxBatch:        1000,
		ChainBatch:      8000,
		ChainBytes:      16 << 20,
		BatchBytes:      4 << 20,
		LargeTxnBytes:   32 << 20,
		MetaSchema:      "sluice_meta",
		Queue:           4096,
		LockWaitTimeout: 20 * time.Second,
		OnMissingRow:    MissingRowStop,
	}
}

// Validate checks every field.
func (c Config) Validate() error {
	bad := func(field, msg string) error {
		return sluice.Errorf(sluice.ErrConfig, "applier", "set "+field+" to a valid value", "%s %s", field, msg)
	}
	switch {
	case c.Task == "" || len(c.Task) > 128:
		return bad("task", "must be 1-128 characters")
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return bad("incremental.worker-count", fmt.Sprintf("is %d (1-%d)", c.Workers, MaxWorkers))
	case c.Batch < 1:
		return bad("incremental.batch", "must be positive")
	case c.MaxBatch < 0:
		return bad("max-batch", "must not be negative")
	case c.ChainBatch < 0:
		return bad("chain-batch", "must not be negative")
	case c.ChainBytes < 0:
		return bad("chain-bytes", "must not be negative")
	case c.BatchBytes < 4096:
		return bad("batch-bytes", "must be at least 4096")
	case c.LargeTxnBytes < c.BatchBytes:
		return bad("large-txn-bytes", "must be at least batch-bytes")
	case c.MetaSchema == "":
		return bad("meta-schema", "is empty")
	case c.Queue < 1:
		return bad("queue", "must be positive")
	case c.LockWaitTimeout < time.Second:
		return bad("lock-wait-timeout", "must be at least 1s")
	case c.OnMissingRow != "" && c.OnMissingRow != MissingRowStop && c.OnMissingRow != MissingRowSkip:
		return bad("incremental.on-missing-row", fmt.Sprintf("is %q (stop or skip)", c.OnMissingRow))
	}
	return nil
}

// TargetConfig is the driver config the applier needs: dbconn's session
// settings plus multi-statement batches, so that a whole group of
// statements travels in one round trip, and found rows rather than changed
// rows as an UPDATE's count (ROW_COUNT()), so that an UPDATE that sets a
// row to the values it holds still shows that the row exists.
func TargetConfig(ep sluice.Endpoint) *mysql.Config {
	c := dbconn.Config(ep, dbconn.Options{})
	c.MultiStatements = true
	c.ClientFoundRows = true
	return c
}

func (c Config) skipMissing() bool { return c.OnMissingRow == MissingRowSkip }

// PoolSize is the target connections an applier of workers uses: one per
// worker, the serial connection, and three for reading a table's
// definition, keys and collations at once (resolve: the scheduler waits
// for them, at a distant target a round trip each) while the workers hold
// theirs.
func PoolSize(workers int) int { return workers + 4 }

// MaxWorkers is the most workers a task may have: every connection of its
// fenced pool, PoolSize(workers) of them, holds one of fence.Slots locks.
const MaxWorkers = fence.MaxWorkers

// OpenTarget opens a pool suitable for New, of PoolSize(workers) connections.
func OpenTarget(ctx context.Context, ep sluice.Endpoint, workers int) (*sql.DB, error) {
	conn, err := mysql.NewConnector(TargetConfig(ep))
	if err != nil {
		return nil, &sluice.Error{Op: "configure target " + ep.Addr(), Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "check target.host, port and user in the task file"}
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(PoolSize(workers))
	db.SetMaxIdleConns(PoolSize(workers))
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, dbconn.Classify(err, "target", ep)
	}
	return db, nil
}
