package apply

import (
	"context"
	"database/sql"
	"time"
)

// Commit order and InnoDB's locks can deadlock in a way the server cannot
// see. Writesets keep groups with a common key value apart, but InnoDB also
// locks index entries next to the ones a statement changes: a duplicate
// check on a unique secondary index takes next-key locks even at READ
// COMMITTED. So a later group, executed and waiting for its commit turn,
// can hold a lock that an earlier group needs. The earlier one waits for
// the lock, the later one waits for the earlier one's commit, and nothing
// moves until innodb_lock_wait_timeout fails the earlier group and the
// applier restarts from its checkpoint.
//
// The lock monitor breaks such cycles. When the group next in commit order
// has been executing for lockProbe while later groups wait for their turn,
// it asks the server who blocks whom. A waiting worker that blocks an
// earlier group rolls back, which releases its locks, and runs its group
// again when its turn comes (MariaDB's optimistic parallel replica does
// the same to the later transaction of a conflict). Without the PROCESS
// privilege the lock tables cannot be read; then, after lockBlind of no
// progress, every waiting worker rolls back: more work redone, never a
// wrong result.
const (
	lockProbe = 50 * time.Millisecond
	lockBlind = time.Second
	// lockPoll spaces the lock queries: the server refreshes its copy of
	// the lock tables only when nobody read it for 100 ms, so faster
	// polling would read the same stale copy forever.
	lockPoll = 150 * time.Millisecond
)

// lockWaitsSQL lists (waiting session, blocking session) pairs.
const lockWaitsSQL = `SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id
	FROM information_schema.INNODB_LOCK_WAITS w
	JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
	JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id`

// lockMonitor runs until the applier stops.
func (a *Applier) lockMonitor() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-a.stop
		cancel()
	}()
	blind := false
	tick := time.NewTicker(lockProbe / 2)
	defer tick.Stop()
	var head uint64
	var since, polled time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		next, failed := a.nextCommit, a.err != nil
		a.mu.Unlock()
		if failed {
			return
		}
		if next != head {
			head, since = next, time.Now()
			continue
		}
		wait := lockProbe
		if blind {
			wait = lockBlind
		}
		if time.Since(since) < wait || !a.laterWaiting(head) {
			continue
		}
		if blind {
			a.yieldWaiting(head, nil, true)
			since = time.Now()
			continue
		}
		if time.Since(polled) < lockPoll {
			continue
		}
		// The pool's spare connection, borrowed per query: the scheduler
		// needs it too (table definitions).
		pairs, err := lockWaits(ctx, a.db)
		polled = time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// No PROCESS privilege, or no such tables (MySQL 8 keeps them
			// in performance_schema): fall back to rolling back blindly.
			blind = true
			continue
		}
		a.yieldWaiting(head, pairs, false)
	}
}

func lockWaits(ctx context.Context, db *sql.DB) ([][2]uint64, error) {
	rows, err := db.QueryContext(ctx, lockWaitsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]uint64
	for rows.Next() {
		var p [2]uint64
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// laterWaiting reports whether any worker holds an executed group that
// waits for its commit turn behind head.
func (a *Applier) laterWaiting(head uint64) bool {
	for _, w := range a.workers {
		if s := w.waitSeq.Load(); s > head {
			return true
		}
	}
	return false
}

// yieldWaiting asks waiting workers to roll back: those whose sessions
// block a session executing an earlier group, or (blind) every waiting
// worker behind head.
func (a *Applier) yieldWaiting(head uint64, pairs [][2]uint64, blind bool) {
	byConn := make(map[uint64]*worker, len(a.workers))
	for _, w := range a.workers {
		byConn[w.connID] = w
	}
	var yield []*worker
	if blind {
		for _, w := range a.workers {
			if w.waitSeq.Load() > head {
				yield = append(yield, w)
			}
		}
	}
	for _, p := range pairs {
		req, blk := byConn[p[0]], byConn[p[1]]
		if req == nil || blk == nil {
			continue
		}
		if s := blk.waitSeq.Load(); s != 0 && s > req.execSeq.Load() {
			yield = append(yield, blk)
		}
	}
	if len(yield) == 0 {
		return
	}
	a.mu.Lock()
	for _, w := range yield {
		w.yieldReq = true
	}
	a.cond.Broadcast()
	a.mu.Unlock()
}

// awaitTurn waits until group seq, executed on w's connection, may commit.
// It returns yielded=true when the lock monitor asked w to step aside: the
// transaction was rolled back, and the caller must execute the group again
// (it is now the group's turn).
func (w *worker) awaitTurn(seq uint64) (yielded bool, err error) {
	a := w.a
	w.waitSeq.Store(seq)
	defer w.waitSeq.Store(0)
	a.mu.Lock()
	for a.err == nil && a.nextCommit != seq && !w.yieldReq {
		a.cond.Wait()
	}
	yield := w.yieldReq && a.nextCommit != seq
	w.yieldReq = false
	err = a.err
	a.mu.Unlock()
	if err != nil || !yield {
		return false, err
	}
	w.waitSeq.Store(0)
	w.bw.rollback()
	a.mu.Lock()
	a.stats.LockYields++
	a.mu.Unlock()
	return true, a.waitTurn(seq)
}

// connectionID reads the server's id of conn's session.
func connectionID(ctx context.Context, conn *sql.Conn) (uint64, error) {
	var id uint64
	err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id, err
}
