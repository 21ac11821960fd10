package replicate

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sink/kafka"
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

// TestSinkMetricsBesideReplication: a Kafka sink task and a task with a
// target register side by side into one worker's registerer (the shared
// names agree in help and labels, or the registry would refuse one); the
// sink task has sluice_kafka_transactions_total and the Kafka error
// classes, and not the target-only counters; it takes every series out
// when it stops.
func TestSinkMetricsBesideReplication(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := prometheus.WrapRegistererWith(prometheus.Labels{"worker": "w1"}, reg)
	a, err := newMetrics("a", w)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newTaskMetrics("k", w, true)
	if err != nil {
		t.Fatalf("a sink task beside a replication task: %v", err)
	}
	a.update(Status{Stage: StageRunning, Txns: 3})
	k.update(Status{Stage: StageRunning, Txns: 7, KafkaTxns: 2, LagSeconds: 1.5})
	k.countError(fmt.Errorf("commit: %w", kafka.ErrFenced))
	series := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				got[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
			}
		}
		return got
	}
	s := series()
	for name, want := range map[string]float64{
		"sluice_replication_transactions_total{task=k,worker=w1}":  7,
		"sluice_replication_transactions_total{task=a,worker=w1}":  3,
		"sluice_kafka_transactions_total{task=k,worker=w1}":        2,
		"sluice_replication_lag_seconds{task=k,worker=w1}":         1.5,
		"sluice_errors_total{class=kafka_fenced,task=k,worker=w1}": 1,
		"sluice_errors_total{class=unreachable,task=k,worker=w1}":  0,
	} {
		if got, ok := s[name]; !ok || got != want {
			t.Errorf("%s = %v (exported %v), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"sluice_kafka_transactions_total{task=a,worker=w1}", "sluice_apply_missing_rows_total{task=k,worker=w1}",
		"sluice_replication_skipped_total{task=k,worker=w1}", "sluice_errors_total{class=kafka_fenced,task=a,worker=w1}"} {
		if _, ok := s[name]; ok {
			t.Errorf("%s is exported", name)
		}
	}
	k.close()
	for name := range series() {
		if strings.Contains(name, "task=k") {
			t.Errorf("%s is still exported after the sink task stopped", name)
		}
	}
}

// TestSinkTaskServesItsOwnMetrics: a sink task of its own process (sluice
// migrate) serves its metrics, with the process's, on metrics-addr from
// the start, says where in its status, and stops serving when its run
// ends. (What the counters count is TestKafkaSinkTaskFailsOver's, in
// cluster/, against a real broker.)
func TestSinkTaskServesItsOwnMetrics(t *testing.T) {
	cfg := DefaultConfig("solo", t.TempDir())
	cfg.Source = sluice.Endpoint{Host: "127.0.0.1", Port: 1, User: "root"}
	kc := kafka.DefaultConfig("solo")
	kc.Brokers, kc.TopicPrefix = []string{"127.0.0.1:1"}, "solo"
	s, err := NewSinkTask(cfg, kc)
	if err != nil {
		t.Fatal(err)
	}
	m, on, err := s.startMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); on == "" || st.MetricsAddr != on {
		t.Fatalf("metrics on %q, status says %q", on, st.MetricsAddr)
	}
	resp, err := http.Get("http://" + on + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`sluice_replication_stage{stage="starting",task="solo"} 1`, `sluice_kafka_transactions_total{task="solo"} 0`,
		`sluice_errors_total{class="kafka_fenced",task="solo"} 0`, "sluice_build_info{", "process_resident_memory_bytes "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s is not served:\n%s", want, b)
		}
	}
	m.close()
	if resp, err := http.Get("http://" + on + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("metrics still served after the run ended")
	}
}

// TestSinkStatusHasRates: the Kafka sink task's status showed 0 events/s
// while its totals grew; its status loop now measures the rates as the
// replication task's does.
func TestSinkStatusHasRates(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig("rates", dir)
	cfg.Source = sluice.Endpoint{Host: "127.0.0.1", Port: 1, User: "root"}
	cfg.MetricsAddr = ""
	cfg.StatusEvery = 50 * time.Millisecond
	kc := kafka.DefaultConfig("rates")
	kc.Brokers, kc.TopicPrefix = []string{"127.0.0.1:1"}, "rates"
	s, err := NewSinkTask(cfg, kc)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := s.startMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.t.statusLoop(ctx, m, s.report) }()
	defer func() { cancel(); <-done }()
	var st Status
	sandboxtest.Eventually(t, time.Minute, "a status with events and a rate", func() bool {
		s.t.events.Add(100)
		st, err = ReadStatus(dir)
		return err == nil && st.Events > 0 && st.EventsPerSec > 0
	}, func() string { return fmt.Sprintf("status after %d events: %+v (%v)", s.t.events.Load(), st, err) })
}
