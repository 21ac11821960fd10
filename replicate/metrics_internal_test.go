package replicate

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsShareAWorkersRegisterer: tasks that register into one
// registerer (a cluster worker's, labelled worker="w1") show side by side,
// each under its task label; the same task registered twice is an error,
// not a panic, and leaves the running one alone; a task that stops takes
// its series out, and can register again.
func TestMetricsShareAWorkersRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := prometheus.WrapRegistererWith(prometheus.Labels{"worker": "w1"}, reg)
	a, err := newMetrics("a", w)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newMetrics("b", w)
	if err != nil {
		t.Fatal(err)
	}
	a.update(Status{Stage: StageRunning, Txns: 3})
	b.update(Status{Stage: StageRunning, Txns: 5})
	want := func(task string, v float64) {
		t.Helper()
		got := -1.0
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "sluice_replication_transactions_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				if strings.Join(ls, ",") == "task="+task+",worker=w1" {
					got = m.GetCounter().GetValue()
				}
			}
		}
		if got != v {
			t.Fatalf("transactions of task %s on w1: %v, want %v", task, got, v)
		}
	}
	want("a", 3)
	want("b", 5)
	if _, err := newMetrics("a", w); err == nil || !strings.Contains(err.Error(), "running twice") {
		t.Fatalf("task a registered twice: %v", err)
	}
	want("a", 3)
	a.close()
	want("a", -1)
	want("b", 5)
	a2, err := newMetrics("a", w)
	if err != nil {
		t.Fatalf("task a again after it stopped: %v", err)
	}
	a2.update(Status{Txns: 1})
	want("a", 1)
	if addr, err := a2.serve("127.0.0.1:0"); addr != "" || err != nil {
		t.Fatalf("a task under a worker served its own metrics: %q %v", addr, err)
	}
}
