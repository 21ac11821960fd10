package replicate

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/fence"
)

// The applier's pool is fenced (package internal/fence): every connection
// holds one of the task's "apply" slots, and a restart waits for the slots
// of a killed predecessor before it reads the checkpoint.

// openFenced opens the applier's pool on the target with slot locks.
func openFenced(ctx context.Context, ep sluice.Endpoint, task string, workers int) (*sql.DB, error) {
	inner, err := mysql.NewConnector(apply.TargetConfig(ep))
	if err != nil {
		return nil, &sluice.Error{Op: "configure target " + ep.Addr(), Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "check target.host, port and user in the task file"}
	}
	db := sql.OpenDB(fence.Connector(inner, "apply", task))
	db.SetMaxOpenConns(apply.PoolSize(workers))
	db.SetMaxIdleConns(apply.PoolSize(workers))
	// Opened all at once first: a ping before would open one connection
	// alone, a handful of round trips before the others start.
	prewarm(ctx, db, apply.PoolSize(workers))
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, dbconn.Classify(err, "target", ep)
	}
	return db, nil
}

// prewarm opens n connections at once and leaves them idle in the pool:
// the applier opens its connections one after the other, and over a
// high-latency link each costs several round trips.
func prewarm(ctx context.Context, db *sql.DB, n int) {
	conns := make([]*sql.Conn, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conns[i], _ = db.Conn(ctx) // an error shows up again when the applier connects
		}(i)
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// waitFence waits until no session of an earlier incarnation of the task
// holds an apply slot, on a connection of plain (an unfenced pool).
func waitFence(ctx context.Context, plain *sql.DB, task string, wait time.Duration) error {
	return fence.Wait(ctx, plain, "apply", task, wait, "start applying task "+task)
}
