package dtx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// TestAlertWebhook: a branch that keeps failing is reported to the webhook
// from its AlertRetryLimit-th failure on, with dtm's fields, and not before.
func TestAlertWebhook(t *testing.T) {
	var fails atomic.Int32
	branch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fails.Add(1)
		http.Error(w, "db down", http.StatusInternalServerError)
	}))
	defer branch.Close()
	var mu sync.Mutex
	var alerts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		m["fails_seen"] = float64(fails.Load())
		mu.Lock()
		alerts = append(alerts, m)
		mu.Unlock()
	}))
	defer hook.Close()
	cfg := dtxtest.FastConfig()
	cfg.AlertWebhook, cfg.AlertRetryLimit = hook.URL+"/alert", 3
	srv := serve(t, cfg, memstore.New())
	if code, out := post(t, srv.URL+"/submit", `{"gid":"alert1","trans_type":"msg","steps":[{"action":"`+branch.URL+`/TransIn"}],"payloads":["{}"]}`); code != 200 {
		t.Fatalf("submit: %d %s", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		mu.Lock()
		n := len(alerts)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d alerts after %d failures", n, fails.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	a := alerts[0]
	if a["gid"] != "alert1" || a["status"] != "submitted" || a["branch"] != branch.URL+"/TransIn" || a["retry_count"] != float64(3) || a["fails_seen"] != float64(3) || a["error"] == "" {
		t.Fatalf("first alert: %v", a)
	}
	if alerts[1]["retry_count"] != float64(4) {
		t.Fatalf("second alert: %v", alerts[1])
	}
}
