package dtx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func sagaBody(gid, action string, extra string) string {
	return fmt.Sprintf(`{"gid":%q,"trans_type":"saga","steps":[{"action":%q,"compensate":%q}],"payloads":["{}"]%s}`, gid, action, action, extra)
}

// TestBadInput: malformed or impossible requests get a clear 4xx and leave
// nothing stored.
func TestBadInput(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		srv := serve(t, dtxtest.FastConfig(), st)
		ok := busi.URL + "/TransOut"
		cases := []struct {
			name, route, gid, body string
			code                   int
			msg                    string
		}{
			{"malformed JSON", "submit", "", `{"gid": "x1", "trans_type": `, 400, "malformed JSON"},
			{"not an object", "submit", "", `[1,2]`, 400, "malformed JSON"},
			{"unknown trans_type", "submit", "x2", `{"gid":"x2","trans_type":"flow"}`, 400, `unsupported trans_type \"flow\"`},
			{"workflow prepare", "prepare", "x3", `{"gid":"x3","trans_type":"workflow"}`, 400, "prepareWorkflow"},
			{"no trans_type", "submit", "x4", `{"gid":"x4"}`, 400, "trans_type is empty"},
			{"no gid", "submit", "", `{"trans_type":"saga"}`, 400, "gid is empty"},
			{"unreachable branch", "submit", "x5", sagaBody("x5", "http://127.0.0.1:1/TransOut", ""), 400, "unreachable"},
			{"not http", "submit", "x6", sagaBody("x6", "ftp://127.0.0.1/x", ""), 400, "only http and https"},
			{"relative URL", "submit", "x7", sagaBody("x7", "/TransOut", ""), 400, "only http and https"},
			{"payload count", "submit", "x8", `{"gid":"x8","trans_type":"saga","steps":[{"action":"` + ok + `"}],"payloads":["{}","{}"]}`, 400, "2 payloads for 1 steps"},
			{"order cycle", "submit", "x9", sagaBody("x9", ok, `,"custom_data":"{\"orders\":{\"0\":[0]},\"concurrent\":true}"`), 400, "does not exist"},
			{"unreachable query_prepared", "prepare", "x10", `{"gid":"x10","trans_type":"msg","steps":[{"action":"` + ok + `"}],"payloads":["{}"],"query_prepared":"http://127.0.0.1:1/qp"}`, 400, "unreachable"},
			{"unknown protocol", "submit", "x11", `{"gid":"x11","trans_type":"saga","protocol":"thrift"}`, 400, "unsupported protocol"},
			{"saga prepare", "prepare", "x12", sagaBody("x12", ok, ""), 400, "no prepare phase"},
			{"submit unprepared tcc", "submit", "x13", `{"gid":"x13","trans_type":"tcc"}`, 409, "was prepared"},
			{"register unknown gid", "registerBranch", "x14", `{"gid":"x14","trans_type":"tcc","branch_id":"01","confirm":"` + ok + `","cancel":"` + ok + `"}`, 409, "status prepared"},
			{"register malformed", "registerBranch", "", `{"gid":1}`, 400, "malformed JSON"},
			{"abort unknown", "abort", "x15", `{"gid":"x15","trans_type":"tcc"}`, 404, "not found"},
		}
		for _, c := range cases {
			code, body := post(t, srv.URL+"/"+c.route, c.body)
			if code != c.code || !strings.Contains(body, c.msg) {
				t.Errorf("%s: HTTP %d %s, want %d with %q", c.name, code, body, c.code, c.msg)
			}
			if c.gid != "" {
				q, err := dtxtest.Query(context.Background(), srv.URL, c.gid)
				if err != nil || q.Transaction != nil || len(q.Branches) != 0 {
					t.Errorf("%s: stored %+v (%v)", c.name, q, err)
				}
			}
		}
		// A registerBranch with an unreachable URL stores no branch.
		if code, body := post(t, srv.URL+"/prepare", `{"gid":"y1","trans_type":"tcc"}`); code != 200 {
			t.Fatalf("prepare: %d %s", code, body)
		}
		code, body := post(t, srv.URL+"/registerBranch", `{"gid":"y1","trans_type":"tcc","branch_id":"01","confirm":"http://127.0.0.1:1/c","cancel":"`+ok+`"}`)
		if code != 400 || !strings.Contains(body, "unreachable") {
			t.Fatalf("register unreachable: %d %s", code, body)
		}
		if q, _ := dtxtest.Query(context.Background(), srv.URL, "y1"); q.Status() != "prepared" || len(q.Branches) != 0 {
			t.Fatalf("after a refused registerBranch: %+v", q)
		}
		resp, err := http.Get(srv.URL + "/query")
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("query without gid: %v %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		resp, err = http.Get(srv.URL + "/nosuch")
		if err != nil || resp.StatusCode != 404 {
			t.Fatalf("unknown route: %v %v", resp.StatusCode, err)
		}
		resp.Body.Close()
	})
}

func submitSaga(t *testing.T, srv *dtxtest.Server, gid string, results map[string]string, wait bool) (int, string) {
	t.Helper()
	p, _ := json.Marshal(dtxtest.Req{Amount: 10, Results: results})
	steps := []map[string]string{
		{"action": busi.URL + "/TransOut", "compensate": busi.URL + "/TransOutCompensate"},
		{"action": busi.URL + "/TransIn", "compensate": busi.URL + "/TransInCompensate"},
	}
	body, _ := json.Marshal(map[string]any{"gid": gid, "trans_type": "saga", "steps": steps, "payloads": []string{string(p), string(p)}, "wait_result": wait})
	return post(t, srv.URL+"/submit", string(body))
}

// TestRetryLimit: a compensation that keeps answering FAILURE (dtm retries
// it forever) is marked stuck after the retry limit, alerted through the log
// and a metric, and left alone; an action that keeps failing rolls the saga back.
func TestRetryLimit(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		cfg := dtxtest.FastConfig()
		cfg.RetryLimit = 3
		cfg.MaxBackoff = 300 * time.Millisecond
		srv := serve(t, cfg, st)
		ctx := context.Background()

		gid := "stuck-" + sanitize(t.Name())
		submitSaga(t, srv, gid, map[string]string{"TransIn": "FAILURE", "TransOutCompensate": "FAILURE"}, false)
		var q *dtxtest.QueryResult
		sandboxtest.Eventually(t, 2*time.Minute, gid+" marked stuck", func() bool {
			var err error
			if q, err = dtxtest.Query(ctx, srv.URL, gid); err != nil {
				t.Fatal(err)
			}
			return q.Transaction != nil && q.Transaction.Stuck != ""
		}, func() string { return fmt.Sprintf("%+v", q.Transaction) })
		if q.Status() != "aborting" || !strings.Contains(q.Transaction.Stuck, "TransOutCompensate") || q.Transaction.Retries != 4 {
			t.Fatalf("want a stuck aborting saga after 4 attempts, got %+v", q.Transaction)
		}
		if n := counterValue(t, srv.Coord.Metrics().Stuck.WithLabelValues("saga", "compensate")); n != 1 {
			t.Fatalf("stuck metric %v, want 1", n)
		}
		time.Sleep(4 * cfg.MaxBackoff)
		if q2, _ := dtxtest.Query(ctx, srv.URL, gid); q2.Transaction.Retries != 4 || q2.Status() != "aborting" {
			t.Fatalf("a stuck transaction was retried: %+v", q2.Transaction)
		}
		// The operator fixes the branch and resets it: it is retried again.
		if code, body := post(t, srv.URL+"/resetNextCronTime", `{"gid":"`+gid+`"}`); code != 200 {
			t.Fatalf("reset: %d %s", code, body)
		}
		if _, err := dtxtest.WaitStatus(ctx, srv.URL, gid, 5*time.Second, "aborting"); err != nil {
			t.Fatal(err)
		}

		gid2 := "limit-" + sanitize(t.Name())
		submitSaga(t, srv, gid2, map[string]string{"TransIn": "ERROR"}, false)
		q, err := dtxtest.WaitStatus(ctx, srv.URL, gid2, 20*time.Second, "failed")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(q.Transaction.RollbackReason, "retry limit") {
			t.Fatalf("rollback reason %q", q.Transaction.RollbackReason)
		}
		eff, err := dtxtest.Effects(ctx, db, gid2)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(eff) != fmt.Sprint(map[string]int{"TransOut": 1, "TransOutCompensate": 1}) {
			t.Fatalf("effects %v", eff)
		}
		// The metric counts a finish once it is stored, so it moves just
		// after the stored status a query reads: wait for it, bounded.
		failed := srv.Coord.Metrics().Transactions.WithLabelValues("saga", "failed")
		for end := time.Now().Add(10 * time.Second); counterValue(t, failed) < 1 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := counterValue(t, failed); n != 1 {
			t.Fatalf("failed transactions metric %v, want 1", n)
		}
	})
}

// TestRetention: finished transactions are removed after the retention
// time; unfinished ones are kept.
func TestRetention(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		cfg := dtxtest.FastConfig()
		cfg.Retention = 500 * time.Millisecond
		cfg.PurgeInterval = 100 * time.Millisecond
		srv := serve(t, cfg, st)
		ctx := context.Background()
		gid := "ret-" + sanitize(t.Name())
		if code, body := submitSaga(t, srv, gid, nil, true); code != 200 {
			t.Fatalf("submit: %d %s", code, body)
		}
		if code, body := post(t, srv.URL+"/prepare", `{"gid":"`+gid+`-open","trans_type":"tcc","timeout_to_fail":3600}`); code != 200 {
			t.Fatalf("prepare: %d %s", code, body)
		}
		var q *dtxtest.QueryResult
		sandboxtest.Eventually(t, time.Minute, "the finished transaction purged", func() bool {
			var err error
			if q, err = dtxtest.Query(ctx, srv.URL, gid); err != nil {
				t.Fatal(err)
			}
			return q.Transaction == nil
		}, func() string { return fmt.Sprintf("%+v", q.Transaction) })
		if q, _ := dtxtest.Query(ctx, srv.URL, gid+"-open"); q.Status() != "prepared" {
			t.Fatalf("unfinished transaction purged: %+v", q)
		}
		// The purge loop counts what the store removed after the removal
		// returns, so the query can see the transaction gone first.
		sandboxtest.Eventually(t, time.Minute, "the purged metric counts it", func() bool { return counterValue(t, srv.Coord.Metrics().Purged) >= 1 })
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestSagaTrace: a wait_result saga submitted over HTTP is broken down by
// phase (sluice_dtx_saga_phase_seconds_total), the phases add up to its
// request time, and every phase a saga must pass through took time; a
// saga answered before its end, or rolled back, adds nothing.
func TestSagaTrace(t *testing.T) {
	sandboxtest.SkipShort(t)
	srv := serve(t, dtxtest.FastConfig(), boltStore(t))
	m := srv.Coord.Metrics()
	histo := func() (uint64, float64) {
		var d dto.Metric
		if err := m.SagaTime.Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
	}
	phase := func(name string) float64 { return counterValue(t, m.Phases.WithLabelValues(name)) }
	phases := []string{"request", "submit_commit_queue", "submit_commit_wait", "submit_commit_write", "submit_commit_wakeup",
		"to_first_branch", "branch_calls", "between_branches", "to_final_commit",
		"final_commit_queue", "final_commit_wait", "final_commit_write", "final_commit_wakeup", "answer"}

	if code, body := submitSaga(t, srv, "trace-ok", nil, true); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	// The trace is summed just after the answer is written: wait for it
	// (bounded against a hang, not a speed check).
	var n uint64
	var total float64
	sandboxtest.Eventually(t, 30*time.Second, "the saga traced", func() bool { n, total = histo(); return n != 0 })
	if n != 1 {
		t.Fatalf("%d sagas traced, want 1", n)
	}
	var sum float64
	for _, p := range phases {
		v := phase(p)
		sum += v
		// Phases that contain a system call or a business call cannot take 0.
		switch p {
		case "submit_commit_write", "final_commit_write", "branch_calls":
			if v <= 0 {
				t.Errorf("phase %s: %v s", p, v)
			}
		}
	}
	if d := sum - total; d > 1e-6 || d < -1e-6 {
		t.Errorf("phases add up to %v s, the request took %v s", sum, total)
	}
	if b := phase("branch_calls"); b >= total {
		t.Errorf("branch calls %v s of a %v s request", b, total)
	}

	if code, body := submitSaga(t, srv, "trace-async", nil, false); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	if code, _ := submitSaga(t, srv, "trace-rollback", map[string]string{"TransIn": "FAILURE"}, true); code != 409 {
		t.Fatalf("rolled-back saga answered %d, want 409", code)
	}
	// A last whole saga: once it is counted, the two before it (answered
	// earlier, on this client's kept-alive connection) were left out.
	if code, body := submitSaga(t, srv, "trace-ok2", nil, true); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	sandboxtest.Eventually(t, 30*time.Second, "the second whole saga traced", func() bool { n, _ = histo(); return n >= 2 })
	if n, _ := histo(); n != 2 {
		t.Errorf("%d sagas traced after an async, a rolled-back and another whole one, want 2", n)
	}
}
