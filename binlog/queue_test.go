package binlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReaderQueueIsBoundedInBytes: one transaction of 48 rows events of
// 1 MiB each is read by a consumer that waits until the reader has taken
// 14 MiB from the source before it takes anything, then takes an event
// every 10 ms (a relay writer slower than the network). What the reader has received but the consumer not yet taken (its
// resume position minus the consumer's) must never pass the queue's
// 16 MiB plus the event waiting to enter it: the former queue of 256
// events took the whole transaction ahead of a slow relay writer.
func TestReaderQueueIsBoundedInBytes(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE qb", "CREATE TABLE qb.t (id int primary key, b longblob)")
	start := masterStatus(t, db)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := tx.Exec(fmt.Sprintf("INSERT INTO qb.t SELECT seq + %d, REPEAT('x', 1048576) FROM qb.seq_1_to_16", 16*i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	end := masterStatus(t, db)
	if end.File != start.File || end.Pos-start.Pos < 48<<20 {
		t.Fatalf("the transaction is not in one binlog file of 48 MiB or more: %s to %s", start, end)
	}
	r, err := binlog.NewReader(config(src))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx, start); err != nil {
		t.Fatal(err)
	}
	for r.Next().Pos < start.Pos+14<<20 {
		if ctx.Err() != nil {
			t.Fatalf("the reader took %s from the source in a minute", r.Next())
		}
		time.Sleep(5 * time.Millisecond)
	}
	const bound = 16<<20 + 2<<20 // the queue, the event waiting to enter it, small events
	at, most := start.Pos, uint32(0)
	for at < end.Pos {
		ev, err := r.GetEvent(ctx)
		if err != nil {
			t.Fatalf("at %d: %v", at, err)
		}
		if ev.Header.LogPos > 0 && ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 && ev.Header.EventType != replication.ROTATE_EVENT {
			at = ev.Header.LogPos
		}
		if next := r.Next(); next.File == start.File && next.Pos > at {
			most = max(most, next.Pos-at)
		}
		if most > bound {
			t.Fatalf("the reader holds %d MiB the consumer has not taken (at %d of %s); the bound is %d MiB", most>>20, at, end, bound>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if most < 8<<20 {
		t.Fatalf("the reader was never more than %d KiB ahead: the test did not fill its queue", most>>10)
	}
	t.Logf("the reader was at most %.1f MiB ahead of its consumer", float64(most)/(1<<20))
}
