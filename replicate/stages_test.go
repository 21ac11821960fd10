package replicate_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestStageTimesAddUp: a task accounts where its pipeline's goroutines
// spend their time (status apply.stages, and
// sluice_replication_stage_seconds_total). The states each stage must go
// through on a small workload are counted, every stage has as many
// goroutines as it runs, none accounts more than the wall time times its
// goroutines, and the counters move with more work.
func TestStageTimesAddUp(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE stg", "CREATE TABLE stg.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE stg.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "stg", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "stg" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "stg" }
	began := time.Now()
	r := run(t, cfg)
	workload(t, src, "stg", 1, 40)
	st := r.waitApplied(t, masterStatus(t, src))
	wall := time.Since(began).Seconds()
	first := checkStages(t, st, wall, cfg.Apply.Workers)

	// Every stage must have been through these: the source and the relay
	// were idle between the test's statements, so every stage waited on
	// its input; the workers sent statements with or without the COMMIT.
	for _, must := range []struct{ stage, state string }{
		{"fetch", "work"}, {"fetch", "wait_input"},
		{"relay_write", "work"}, {"relay_write", "wait_input"}, {"relay_write", "flush"},
		{"decode", "work"}, {"decode", "wait_input"},
		{"schedule", "work"}, {"schedule", "wait_input"},
		{"worker", "work"}, {"worker", "wait_input"},
	} {
		if first[must.stage].Seconds[must.state] <= 0 {
			t.Errorf("stage %s, state %s: %v s, want > 0 (%+v)", must.stage, must.state, first[must.stage].Seconds[must.state], first[must.stage])
		}
	}
	round := func(s replicate.StageTime) float64 {
		return s.Seconds["execute"] + s.Seconds["execute_commit"] + s.Seconds["commit"]
	}
	if round(first["worker"]) <= 0 {
		t.Errorf("the workers' round trips to the target were not timed: %+v", first["worker"])
	}

	// The same on the metrics endpoint, read when scraped.
	body := scrape(t, st.MetricsAddr)
	re := regexp.MustCompile(`sluice_replication_stage_seconds_total\{stage="worker",state="wait_input",task="stg"\} ([0-9.e+-]+)`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no worker wait_input series on /metrics:\n%s", body)
	}
	if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < first["worker"].Seconds["wait_input"] {
		t.Errorf("/metrics has worker wait_input %s, status had %.3f earlier", m[1], first["worker"].Seconds["wait_input"])
	}

	// More work moves the counters of the stages that do it.
	workload(t, src, "stg", 100, 40)
	st = r.waitApplied(t, masterStatus(t, src))
	second := checkStages(t, st, time.Since(began).Seconds(), cfg.Apply.Workers)
	for _, stage := range []string{"fetch", "relay_write", "decode", "schedule", "worker"} {
		if second[stage].Seconds["work"] <= first[stage].Seconds["work"] {
			t.Errorf("stage %s: work %.4f s after more transactions, %.4f s before", stage, second[stage].Seconds["work"], first[stage].Seconds["work"])
		}
	}
	if round(second["worker"]) <= round(first["worker"]) {
		t.Errorf("worker round trips: %.4f s after more transactions, %.4f s before", round(second["worker"]), round(first["worker"]))
	}
	r.stop(t)
}

// checkStages checks the stage times of a status taken wall seconds after
// the task started, and returns them.
func checkStages(t *testing.T, st replicate.Status, wall float64, workers int) map[string]replicate.StageTime {
	t.Helper()
	if st.Apply == nil || len(st.Apply.Stages) == 0 {
		t.Fatalf("no stage times in the status: %+v", st.Apply)
	}
	stages := st.Apply.Stages
	for _, name := range []string{"fetch", "relay_write", "decode", "schedule", "worker"} {
		s, ok := stages[name]
		if !ok {
			t.Fatalf("stage %s missing: %+v", name, stages)
		}
		want := 1
		if name == "worker" {
			want = workers
		}
		if s.Goroutines != want {
			t.Errorf("stage %s ran %d goroutines at once, want %d", name, s.Goroutines, want)
		}
		var sum float64
		for state, v := range s.Seconds {
			if v < 0 {
				t.Errorf("stage %s, state %s: %v s", name, state, v)
			}
			sum += v
		}
		if sum > wall*float64(s.Goroutines) {
			t.Errorf("stage %s accounts %.3f s, more than %d goroutines x %.3f s of wall time: %v", name, sum, s.Goroutines, wall, s.Seconds)
		}
	}
	return stages
}
