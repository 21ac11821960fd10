package sandbox_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestEtcdUpRestartDown starts a member, restarts it after a crash on the
// same data, and checks up's refusals.
func TestEtcdUpRestartDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	e := sandboxtest.StartEtcd(t)
	ctx := context.Background()
	if _, ok := e.Running(); !ok {
		t.Fatal("member not running after up")
	}
	resp, err := http.Get(e.Endpoint() + "/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Up on a running sandbox returns it; on another port it refuses.
	c := sandbox.DefaultEtcdConfig()
	c.Dir, c.Name, c.Port, c.PeerPort = e.Home[:len(e.Home)-len("/etcd")], "etcd", e.Port, e.PeerPort
	if _, err := sandbox.EtcdUp(ctx, c); err != nil {
		t.Fatalf("up on a running member: %v", err)
	}
	c.Port++
	if _, err := sandbox.EtcdUp(ctx, c); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("up on another port: %v, want a config error", err)
	}
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Running(); ok {
		t.Fatal("member still running after kill")
	}
	if err := e.Restart(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.EtcdDown(ctx, c.Dir, "etcd", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Running(); ok {
		t.Fatal("member still running after down")
	}
}
