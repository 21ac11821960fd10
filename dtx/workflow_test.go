package dtx_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

type progresses struct {
	Transaction struct {
		Gid, Status, Result string
	} `json:"transaction"`
	Progresses []struct {
		BranchID string `json:"branch_id"`
		Op       string `json:"op"`
		Status   string `json:"status"`
		BinData  []byte `json:"bin_data"`
	} `json:"progresses"`
}

func prepareWorkflow(t *testing.T, srv *dtxtest.Server, gid, callback string) progresses {
	t.Helper()
	custom, _ := json.Marshal(map[string]any{"name": "wf1", "data": []byte(`{"amount":30}`)})
	body, _ := json.Marshal(map[string]any{"gid": gid, "trans_type": "workflow", "custom_data": string(custom),
		"query_prepared": callback, "protocol": "http"})
	code, out := post(t, srv.URL+"/prepareWorkflow", string(body))
	if code != 200 {
		t.Fatalf("prepareWorkflow: %d %s", code, out)
	}
	var p progresses
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("prepareWorkflow answer %s: %v", out, err)
	}
	return p
}

// TestWorkflowStepRecordedOnce: a workflow's recorded steps come back to a
// client that prepares it again (the replay), a step is recorded once, and
// the client's submit ends it with its result; after that nothing more is
// recorded.
func TestWorkflowStepRecordedOnce(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		srv := serve(t, dtxtest.FastConfig(), st)
		gid := "wf-once"
		if p := prepareWorkflow(t, srv, gid, busi.URL+"/wf"); p.Transaction.Status != "prepared" || len(p.Progresses) != 0 {
			t.Fatalf("new workflow: %+v", p)
		}
		step := `{"gid":"wf-once","trans_type":"workflow","branch_id":"01","op":"action","status":"succeed","data":"out-1"}`
		if code, out := post(t, srv.URL+"/registerBranch", step); code != 200 {
			t.Fatalf("record step: %d %s", code, out)
		}
		if code, out := post(t, srv.URL+"/registerBranch", step); code != 409 || !strings.Contains(out, "already recorded") {
			t.Fatalf("step recorded twice: %d %s", code, out)
		}
		if code, out := post(t, srv.URL+"/registerBranch", `{"gid":"wf-once","trans_type":"workflow","branch_id":"02","op":"action","status":"maybe"}`); code != 400 {
			t.Fatalf("bad status: %d %s", code, out)
		}
		p := prepareWorkflow(t, srv, gid, busi.URL+"/wf")
		if len(p.Progresses) != 1 || p.Progresses[0].BranchID != "01" || p.Progresses[0].Status != "succeed" || string(p.Progresses[0].BinData) != "out-1" {
			t.Fatalf("replay: %+v", p)
		}
		result := base64.StdEncoding.EncodeToString([]byte("done"))
		if code, out := post(t, srv.URL+"/submit", `{"gid":"wf-once","trans_type":"workflow","req_extra":{"status":"succeed","result":"`+result+`"}}`); code != 200 {
			t.Fatalf("submit: %d %s", code, out)
		}
		if p := prepareWorkflow(t, srv, gid, busi.URL+"/wf"); p.Transaction.Status != "succeed" || p.Transaction.Result != result {
			t.Fatalf("after submit: %+v", p)
		}
		if code, out := post(t, srv.URL+"/registerBranch", `{"gid":"wf-once","trans_type":"workflow","branch_id":"02","op":"action","status":"succeed"}`); code != 409 {
			t.Fatalf("record after the end: %d %s", code, out)
		}
		if code, out := post(t, srv.URL+"/submit", `{"gid":"wf-once","trans_type":"workflow","req_extra":{"status":"failed"}}`); code != 409 {
			t.Fatalf("second submit: %d %s", code, out)
		}
	})
}

// TestWorkflowResumedByRecovery: a workflow its client left prepared is
// resumed through its callback (op = the workflow's name, body = its
// input), until the resumed workflow ends itself; a callback that fails is
// retried.
func TestWorkflowResumedByRecovery(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		var srv *dtxtest.Server
		var calls atomic.Int32
		cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			q := r.URL.Query()
			if q.Get("op") != "wf1" || q.Get("branch_id") != "00" || string(body) != `{"amount":30}` {
				t.Errorf("callback: %s %s", r.URL, body)
			}
			if calls.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError) // the first resume fails
				return
			}
			post(t, srv.URL+"/submit", `{"gid":"`+q.Get("gid")+`","trans_type":"workflow","req_extra":{"status":"failed","rollback_reason":"no stock"}}`)
			io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
		}))
		defer cb.Close()
		srv = serve(t, dtxtest.FastConfig(), st)
		prepareWorkflow(t, srv, "wf-resume", cb.URL+"/resume")
		q, err := dtxtest.WaitStatus(context.Background(), srv.URL, "wf-resume", 30*time.Second, "failed")
		if err != nil {
			t.Fatalf("%v (%d callbacks)", err, calls.Load())
		}
		if calls.Load() != 2 || q.Transaction.RollbackReason != "no stock" {
			t.Fatalf("%d callbacks, %+v", calls.Load(), q.Transaction)
		}
	})
}
