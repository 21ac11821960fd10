package replicate_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

var lagMetric = regexp.MustCompile(`(?m)^sluice_replication_lag_seconds\{task="idlelag"\} (\S+)$`)

// TestNoLagAfterBinlogRotate: FLUSH BINARY LOGS on an idle source sends a
// rotate and the new file's header events, none a transaction. A caught-up
// task must keep reporting lag 0 (status and metric), not a lag that grows
// until the next transaction.
func TestNoLagAfterBinlogRotate(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE idlelag", "CREATE TABLE idlelag.t (id int primary key)", "INSERT INTO idlelag.t VALUES (1)")
	cfg := taskConfig(t, "idlelag", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "idlelag" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "idlelag" }
	r := run(t, cfg)
	defer r.stop(t)
	r.waitApplied(t, masterStatus(t, src))

	sandboxtest.MustExec(t, src, "FLUSH BINARY LOGS")
	rotated := masterStatus(t, src)
	// Placed by progress: the relay holds the new file's header events.
	for s := r.task.Status(); !after(s.Relay, rotated) || s.Relay.File != rotated.File; s = r.task.Status() {
		select {
		case err := <-r.done:
			r.err, r.ended = err, true
			t.Fatalf("task ended before the relay reached %s: %v", rotated, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Until the applier has read what the relay holds, the newest event's
	// timestamp counts (source timestamps are whole seconds, so that is up
	// to a second even when the event just came). It must settle to 0; it
	// used to grow from here by one second a second.
	// The bound only turns a lag that never settles into a failure.
	sandboxtest.Eventually(t, time.Minute, "lag 0 on an idle task after FLUSH BINARY LOGS",
		func() bool { return r.task.Status().LagSeconds == 0 },
		func() string {
			s := r.task.Status()
			return fmt.Sprintf("lag %.2fs (applied %s, relay %s, source %s)", s.LagSeconds, s.Applied, s.Relay, s.Source)
		})
	// And stay 0: watch it for 2.5 s (it is computed to the nanosecond, so
	// any false lag shows).
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s := r.task.Status(); s.LagSeconds != 0 {
			t.Fatalf("idle task after FLUSH BINARY LOGS: lag %.2fs (applied %s, relay %s, source %s)", s.LagSeconds, s.Applied, s.Relay, s.Source)
		}
	}
	// The metric comes from the same status, refreshed by the status loop.
	resp, err := http.Get("http://" + r.task.Status().MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := lagMetric.FindSubmatch(body); m == nil || string(m[1]) != "0" {
		t.Fatalf("lag metric after FLUSH BINARY LOGS: %q", m)
	}

	// A real transaction after the rotate is still applied and the lag
	// settles back to 0.
	sandboxtest.MustExec(t, src, "INSERT INTO idlelag.t VALUES (2)")
	r.waitApplied(t, masterStatus(t, src))
	sameData(t, srcInst, dstInst, "idlelag")
}
