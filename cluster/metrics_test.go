package cluster_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestWorkerMetricsFollowTheTask: two tasks on one worker register their
// replication metrics side by side on the worker's endpoint (no clash),
// every sluice series there is labelled worker="w1", and each task's
// transactions count up under load. When a second worker joins, the
// balancer moves one task to it: its series then show on w2 (counting
// again from the new run) and are gone from w1, while the other task's
// stay on w1. sluice status --etcd shows each task's worker, stage and
// lag.
func TestWorkerMetricsFollowTheTask(t *testing.T) {
	skipShort(t)
	h := newHarness(t, 2)
	h.startWorker("w1", "--metrics-addr", "127.0.0.1:0")
	h.waitFor("w1 runs both tasks", time.Minute, func() bool {
		o := h.owners()
		for _, task := range h.tasks {
			if w, ok := running(o[task]); !ok || w != "w1" {
				return false
			}
		}
		return true
	})
	url1 := h.metricsURL("w1")
	stop := h.load(sandboxtest.Seed(t))
	defer stop()
	h.waitFor("w1's metrics count both tasks' transactions", time.Minute, func() bool {
		s := scrapeSeries(t, url1)
		for _, task := range h.tasks {
			if s.get("sluice_replication_transactions_total", "task", task, "worker", "w1") <= 0 ||
				s.get("sluice_replication_stage", "stage", "running", "task", task, "worker", "w1") != 1 {
				return false
			}
		}
		return true
	})
	s := scrapeSeries(t, url1)
	for _, l := range s.lines {
		if strings.HasPrefix(l, "sluice_") && !strings.Contains(l, `worker="w1"`) {
			t.Errorf("w1 exports a sluice series without its worker label: %s", l)
		}
	}
	if s.get("sluice_build_info", "worker", "w1") != 1 || s.get("process_resident_memory_bytes", "worker", "w1") <= 0 {
		t.Errorf("w1 lacks its build and process metrics:\n%s", strings.Join(s.lines, "\n"))
	}

	h.startWorker("w2", "--metrics-addr", "127.0.0.1:0")
	var on1, on2 string
	h.waitFor("the balancer gives w2 one task", 2*time.Minute, func() bool {
		o := h.owners()
		on1, on2 = "", ""
		for _, task := range h.tasks {
			switch w, ok := running(o[task]); {
			case ok && w == "w1":
				on1 = task
			case ok && w == "w2":
				on2 = task
			}
		}
		return on1 != "" && on2 != ""
	})
	url2 := h.metricsURL("w2")
	h.waitFor("w2's metrics count the moved task, and w1's no longer show it", time.Minute, func() bool {
		s1, s2 := scrapeSeries(t, url1), scrapeSeries(t, url2)
		return s2.get("sluice_replication_transactions_total", "task", on2, "worker", "w2") > 0 &&
			!s2.has("sluice_replication_", "task", on1) && !s1.has("sluice_replication_", "task", on2) &&
			s1.get("sluice_replication_transactions_total", "task", on1, "worker", "w1") > 0
	})
	stop()
	h.waitEqual(time.Minute)
	out := h.sluice("status", "--etcd", etcd.Endpoint(), "--etcd-prefix", "/"+h.prefix)
	for task, w := range map[string]string{on1: "w1", on2: "w2"} {
		if !regexp.MustCompile(`(?m)^` + task + `\s+` + w + `\s+running\s+\d+\.\ds\s`).MatchString(out) {
			t.Errorf("status does not show %s running on %s with its lag:\n%s", task, w, out)
		}
	}
}

// metricsURL is where a worker said it serves its metrics.
func (h *harness) metricsURL(worker string) string {
	h.t.Helper()
	var u string
	h.waitFor(worker+" says where its metrics are", 30*time.Second, func() bool {
		m := metricsAddr.FindStringSubmatch(h.workerOut(worker))
		if m != nil {
			u = m[1]
		}
		return m != nil
	})
	return u
}

// series is one scrape in the text exposition format.
type series struct{ lines []string }

func scrapeSeries(t *testing.T, url string) series {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return series{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return series{}
	}
	var s series
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			s.lines = append(s.lines, l)
		}
	}
	return s
}

// get returns the value of the series name with at least the labels kv
// (name, value pairs), or -1 when there is none.
func (s series) get(name string, kv ...string) float64 {
	for _, l := range s.lines {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for i := 0; i < len(kv); i += 2 {
			if !strings.Contains(l, kv[i]+`="`+kv[i+1]+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			return v
		}
	}
	return -1
}

// has reports whether any series named prefix... carries the label.
func (s series) has(prefix, label, value string) bool {
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, label+`="`+value+`"`) {
			return true
		}
	}
	return false
}
