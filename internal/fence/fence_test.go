package fence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/fence"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestLiveHolderRefusedDeadOneWaited: a task's slots held by idle sessions
// of a live process (another sluice on the same task and target, from
// another directory) make a start fail within seconds, naming the session
// and the fix, instead of waiting out the whole bound; a slot whose holder
// is still running a statement (a killed process's last work) is waited for
// until that statement ends.
func TestLiveHolderRefusedDeadOneWaited(t *testing.T) {
	inst := sandboxtest.Start(t, "fence")
	plain := sandboxtest.MustOpen(t, inst, "")
	cfg, err := mysql.ParseDSN(inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// A live process: a fenced pool with an idle connection.
	live := sql.OpenDB(fence.Connector(inner, "apply", "live"))
	defer live.Close()
	if err := live.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = fence.Wait(ctx, plain, "apply", "live", time.Minute, "start applying task live")
	var se *sluice.Error
	if !errors.Is(err, sluice.ErrConfig) || !errors.As(err, &se) || !strings.Contains(err.Error(), "another sluice process runs this task") || !strings.Contains(se.Hint, "KILL ") {
		t.Fatalf("a live holder: %v", err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Fatalf("refusing a live holder took %s", d)
	}

	// A killed process's last statement: its session runs a query that ends.
	busy := sql.OpenDB(fence.Connector(inner, "apply", "dead"))
	defer busy.Close()
	conn, err := busy.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, "DO SLEEP(4)")
		conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // end the session, as a killed process's does
		conn.Close()
		done <- err
	}()
	// Wait until the statement runs, by the holder's state, not by time.
	for {
		var n int
		if err := plain.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'DO SLEEP(4)'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := fence.Wait(ctx, plain, "apply", "dead", time.Minute, "start applying task dead"); err != nil {
		t.Fatalf("a holder running its last statement must be waited for: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
