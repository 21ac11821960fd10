package replicate

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// After kill -9 the target may still be running the dead process's last
// statements: the applier sends a group (data, checkpoint, COMMIT) in one
// round trip, and the server finishes it even though the client is gone.
// A new process that reads the checkpoint before that COMMIT lands resumes
// from an older position and applies those transactions a second time.
//
// The fence closes that window. Every applier connection holds a named
// lock (GET_LOCK, released by the server only when the session ends) on
// one of the task's slots. Before reading the checkpoint, the task takes
// every slot itself, which waits until each session of an earlier
// incarnation has ended, and with it its transaction (committed or rolled
// back). Only then is the checkpoint read.

// fenceSlots is how many slot locks exist for a pool of n connections.
func fenceSlots(workers int) int { return 2*(workers+2) + 8 }

func slotName(task string, i int) string {
	h := sha1.Sum([]byte(task))
	return fmt.Sprintf("sluice.apply.%x.%d", h[:8], i)
}

// fencedConnector wraps the target connector: each new connection takes a
// free slot lock before the pool hands it out.
type fencedConnector struct {
	inner driver.Connector
	task  string
	slots int
	next  atomic.Int64 // the slot a new connection tries first
}

func (c *fencedConnector) Driver() driver.Driver { return c.inner.Driver() }

func (c *fencedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("replicate: target driver cannot query")
	}
	// Slots are tried round-robin from a counter, so a new connection
	// usually gets one in a single round trip (latency to the target adds
	// up quickly otherwise).
	for tries := 0; tries < c.slots; tries++ {
		i := int(c.next.Add(1)-1) % c.slots
		v, err := queryInt(ctx, q, fmt.Sprintf("SELECT GET_LOCK('%s', 0)", slotName(c.task, i)))
		if err != nil {
			conn.Close()
			return nil, err
		}
		if v == 1 {
			return conn, nil
		}
	}
	// More connections than slots: not expected with the pool's limit.
	conn.Close()
	return nil, fmt.Errorf("replicate: no free fence slot among %d for task %s", c.slots, c.task)
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
			return 0, errors.New("replicate: no result")
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
	return 0, fmt.Errorf("replicate: unexpected %T", dest[0])
}

// openFenced opens the applier's pool on the target with slot locks.
func openFenced(ctx context.Context, ep sluice.Endpoint, task string, workers int) (*sql.DB, error) {
	inner, err := mysql.NewConnector(apply.TargetConfig(ep))
	if err != nil {
		return nil, &sluice.Error{Op: "configure target " + ep.Addr(), Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "check target.host, port and user in the task file"}
	}
	db := sql.OpenDB(&fencedConnector{inner: inner, task: task, slots: fenceSlots(workers)})
	db.SetMaxOpenConns(workers + 2)
	db.SetMaxIdleConns(workers + 2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, dbconn.Classify(err, "target", ep)
	}
	prewarm(ctx, db, workers+2)
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

// fence waits until no session of an earlier incarnation of the task holds
// a slot, on a connection of plain (an unfenced pool).
func fence(ctx context.Context, plain *sql.DB, task string, workers int, wait time.Duration) error {
	conn, err := plain.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer conn.ExecContext(context.Background(), "SELECT RELEASE_ALL_LOCKS()") //nolint:errcheck // the session ends anyway
	secs := int(wait / time.Second)
	if secs < 1 {
		secs = 1
	}
	// One round trip for every slot: GET_LOCK calls run in order, each
	// waiting up to secs for an earlier session to end.
	var b strings.Builder
	b.WriteString("SELECT ")
	n := fenceSlots(workers)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "COALESCE(GET_LOCK('%s', %d), 0)", slotName(task, i), secs)
	}
	var got int
	if err := conn.QueryRowContext(ctx, b.String()).Scan(&got); err != nil {
		return fmt.Errorf("replicate: fence: %w", err)
	}
	if got != n {
		return &sluice.Error{Op: "start applying task " + task,
			Err:  fmt.Errorf("a target session of an earlier run of this task is still busy after %s", wait),
			Hint: "another sluice process may run this task against the same target; stop it, or check SHOW PROCESSLIST on the target"}
	}
	return nil
}
