// Package fence keeps a restarted sluice from reading its checkpoints
// while sessions of a killed predecessor are still at work on the target.
//
// After kill -9 the server may still be running the dead process's last
// statements: a chunk or a group (rows, checkpoint row, COMMIT) is sent in
// one round trip, and the server finishes it although the client is gone.
// A new process that reads the checkpoints before that COMMIT lands sees an
// older state: it applies transactions a second time, or finds rows in a
// table it believes it has not loaded yet.
//
// Every connection of a fenced pool holds a named lock (GET_LOCK, released
// by the server only when the session ends) on one of a task's slots.
// Before reading checkpoints, a new process takes every slot itself on a
// plain connection, which waits until each session of an earlier
// incarnation has ended, and with it its transaction (committed or rolled
// back). The number of slots is fixed, not derived from the pool size, so
// that a rerun with a smaller pool still waits for every old session.
package fence

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
)

// Slots is the number of slot locks per task and kind: more than any pool
// sluice opens (a pool larger than this cannot open its last connections).
const Slots = 256

// MaxWorkers is the most apply workers a task may have: each of the
// apply pool's workers+4 connections (apply.PoolSize) holds one of the
// Slots locks. It lives here, beside Slots, so that task validation needs
// no import of apply.
const MaxWorkers = Slots - 4

// SlotName is the lock name of slot i. kind keeps the full copy's and the
// applier's sessions apart ("load", "apply").
func SlotName(kind, task string, i int) string {
	h := sha1.Sum([]byte(task))
	return fmt.Sprintf("sluice.%s.%x.%d", kind, h[:8], i)
}

// connector wraps a connector: each new connection takes a free slot lock
// before the pool hands it out.
type connector struct {
	inner      driver.Connector
	kind, task string
	next       atomic.Int64 // the slot a new connection tries first
}

// Connector returns inner with every new connection holding a slot.
func Connector(inner driver.Connector, kind, task string) driver.Connector {
	return &connector{inner: inner, kind: kind, task: task}
}

func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("fence: the target driver cannot query")
	}
	// Slots are tried round-robin from a counter, so a new connection
	// usually gets one in a single round trip.
	for tries := 0; tries < Slots; tries++ {
		i := int(c.next.Add(1)-1) % Slots
		v, err := queryInt(ctx, q, fmt.Sprintf("SELECT GET_LOCK('%s', 0)", SlotName(c.kind, c.task, i)))
		if err != nil {
			conn.Close()
			return nil, err
		}
		if v == 1 {
			return conn, nil
		}
	}
	conn.Close()
	return nil, fmt.Errorf("fence: no free slot among %d for task %s", Slots, c.task)
}

func queryInt(ctx context.Context, q driver.QueryerContext, query string) (int64, error) {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return 0, errors.New("fence: no result")
		}
		return 0, err
	}
	switch v := dest[0].(type) {
	case int64:
		return v, nil
	case []byte:
		var n int64
		_, err := fmt.Sscan(string(v), &n)
		return n, err
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("fence: unexpected %T", dest[0])
}

// Wait returns once no session of an earlier incarnation holds a slot of
// kind for task, waiting at most wait. plain must be a pool whose
// connections hold no slot of it (an unfenced pool). what names the work
// for the error ("start applying task x").
func Wait(ctx context.Context, plain *sql.DB, kind, task string, wait time.Duration, what string) error {
	conn, err := plain.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer conn.ExecContext(context.Background(), "SELECT RELEASE_ALL_LOCKS()") //nolint:errcheck // the session ends anyway
	// One round trip tries every slot without waiting; only the busy ones
	// are then waited for, one after the other, within one deadline.
	var b strings.Builder
	b.WriteString("SELECT CONCAT(")
	for i := 0; i < Slots; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "COALESCE(GET_LOCK('%s', 0), 0)", SlotName(kind, task, i))
	}
	b.WriteString(")")
	var got string
	if err := conn.QueryRowContext(ctx, b.String()).Scan(&got); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	var held []string
	for i := 0; i < len(got); i++ {
		if got[i] != '1' {
			held = append(held, SlotName(kind, task, i))
		}
	}
	if len(held) > 0 && namesHolder(ctx, conn) {
		if err := liveHolder(ctx, conn, held, what); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(wait)
	busy := false
	for i := 0; i < len(got) && !busy; i++ {
		if got[i] == '1' {
			continue
		}
		secs := max(int(math.Ceil(time.Until(deadline).Seconds())), 0)
		var v sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", SlotName(kind, task, i), secs).Scan(&v); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		busy = v.Int64 != 1
	}
	if busy || len(got) != Slots {
		return &sluice.Error{Op: what,
			Err:  fmt.Errorf("a target session of an earlier run of this task is still busy after %s", wait),
			Hint: "another sluice process may run this task against the same target; stop it, or check SHOW PROCESSLIST on the target"}
	}
	return nil
}

// idleGrace is how long a slot's holder may sit idle before it counts as a
// live process: a killed process's idle sessions end as soon as the server
// reads the closed socket, so only a live one stays idle.
var idleGrace = 2 * time.Second

// liveHolder refuses at once when a session holding one of the slots is
// idle (Sleep) for idleGrace: a live sluice process runs the same task
// against this target (say, from another directory), and waiting would
// only hang. Holders that run statements are a killed process's last work,
// which the caller waits for.
func liveHolder(ctx context.Context, conn *sql.Conn, names []string, what string) error {
	idle := map[int64]time.Time{} // session -> idle since
	for start := time.Now(); time.Since(start) <= idleGrace+time.Second; {
		seen := map[int64]bool{}
		for _, name := range names {
			var id sql.NullInt64
			if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
				return fmt.Errorf("fence: %w", err)
			}
			if !id.Valid || seen[id.Int64] {
				continue
			}
			seen[id.Int64] = true
			var command, host string
			err := conn.QueryRowContext(ctx, "SELECT COMMAND, HOST FROM information_schema.PROCESSLIST WHERE ID = ?", id.Int64).Scan(&command, &host)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("fence: %w", err)
			}
			if command != "Sleep" {
				delete(idle, id.Int64)
				continue
			}
			if _, ok := idle[id.Int64]; !ok {
				idle[id.Int64] = time.Now()
			} else if time.Since(idle[id.Int64]) >= idleGrace {
				return &sluice.Error{Op: what,
					Err: fmt.Errorf("%w: another sluice process runs this task against this target: its session %d from %s holds the task's lock %s and is idle", sluice.ErrConfig, id.Int64, host, name),
					Hint: "stop the other process (tasks share their checkpoints on a target by name: give this one another name if it is another task); " +
						"if that process is gone with its host, end its session with KILL " + fmt.Sprint(id.Int64) + " on the target"}
			}
		}
		if len(seen) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
