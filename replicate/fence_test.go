package replicate_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// The fence must wait while a session of an earlier incarnation is alive
// and pass once it has ended.
func TestFenceWaitsForEarlierSessions(t *testing.T) {
	sandboxtest.SkipShort(t)
	ctx := context.Background()
	old, err := replicate.OpenFenced(ctx, dstInst.Endpoint(), "fence", 2)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := old.Conn(ctx) // a live session holding a slot
	if err != nil {
		t.Fatal(err)
	}
	plain, err := apply.OpenTarget(ctx, dstInst.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	began := time.Now()
	if err := replicate.Fence(ctx, plain, "fence", time.Second); err == nil {
		t.Fatal("fence passed while an earlier session held a slot")
	}
	if time.Since(began) < time.Second {
		t.Fatalf("fence gave up after %s without waiting", time.Since(began))
	}
	// Another task's fence is independent.
	if err := replicate.Fence(ctx, plain, "other", time.Second); err != nil {
		t.Fatalf("fence of another task: %v", err)
	}
	conn.Close()
	old.Close()
	if err := replicate.Fence(ctx, plain, "fence", 10*time.Second); err != nil {
		t.Fatalf("fence after the earlier sessions ended: %v", err)
	}
}
