package sandbox_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestKafkaUpDown starts a real broker, checks that it serves metadata,
// that a second up of the running instance is a no-op, and that down stops
// it: the port then refuses, and up again brings back the same cluster.
func TestKafkaUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kafka broker")
	}
	k := sandboxtest.StartOwnKafka(t)
	ctx := context.Background()
	if err := sandbox.PingKafka(ctx, k.Addr()); err != nil {
		t.Fatal(err)
	}
	props, err := os.ReadFile(k.Home + "/server.properties")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"process.roles=broker,controller", "transaction.state.log.min.isr=1", "listeners=PLAINTEXT://127.0.0.1:"} {
		if !strings.Contains(string(props), want) {
			t.Errorf("server.properties lacks %q", want)
		}
	}
	dir := k.Home[:strings.LastIndexByte(k.Home, '/')]
	if err := sandbox.KafkaDown(ctx, dir, k.Name, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Running(); ok {
		t.Fatal("broker still running after down")
	}
	if err := sandbox.PingKafka(ctx, k.Addr()); err == nil {
		t.Fatal("broker still answers after down")
	}
	sandboxtest.RestartKafka(t, k)
	again, err := sandbox.LoadKafka(dir, k.Name)
	if err != nil {
		t.Fatal(err)
	}
	if again.ClusterID != k.ClusterID || again.ControllerPort != k.ControllerPort {
		t.Fatalf("restart changed the cluster: %+v vs %+v", again, k)
	}
	if err := sandbox.PingKafka(ctx, k.Addr()); err != nil {
		t.Fatal(err)
	}
}
