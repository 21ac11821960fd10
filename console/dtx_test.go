package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCoordinator answers dtm's admin API (/api/dtmsvr/all, query,
// forceStop) over n transactions, paged by position as sluice and dtm page
// (the position is opaque to the console).
type fakeCoordinator struct {
	mu      sync.Mutex
	txns    []Txn
	stopped []string
	calls   int
}

func newFakeCoordinator(n int) *fakeCoordinator {
	f := &fakeCoordinator{}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		ct := t0.Add(time.Duration(i) * time.Second)
		st, typ := "succeed", "saga"
		switch {
		case i%10 == 3:
			st = "failed"
		case i%10 == 7:
			st = "submitted"
		}
		if i%4 == 1 {
			typ = "tcc"
		}
		f.txns = append(f.txns, Txn{Gid: fmt.Sprintf("g%06d", i), TransType: typ, Status: st, CreateTime: &ct})
	}
	return f
}

func (f *fakeCoordinator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	q := r.URL.Query()
	switch r.URL.Path {
	case "/api/dtmsvr/all":
		limit, _ := strconv.Atoi(q.Get("limit"))
		start, _ := strconv.Atoi(q.Get("position"))
		var out []Txn
		next := ""
		for i := start; i < len(f.txns); i++ {
			t := f.txns[i]
			if (q.Get("status") == "" || t.Status == q.Get("status")) && (q.Get("transType") == "" || t.TransType == q.Get("transType")) {
				out = append(out, t)
			}
			if len(out) == limit {
				if i+1 < len(f.txns) {
					next = strconv.Itoa(i + 1)
				}
				break
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"transactions": out, "next_position": next})
	case "/api/dtmsvr/query":
		for _, t := range f.txns {
			if t.Gid == q.Get("gid") {
				ft := t.CreateTime.Add(20 * time.Millisecond)
				bs := []Branch{{Gid: t.Gid, BranchID: "01", Op: "action", Status: "succeed", URL: "http://busi/TransOut", BinData: []byte(`{"amount":30,"password":"hunter2"}`), CreateTime: t.CreateTime, FinishTime: &ft}}
				_ = json.NewEncoder(w).Encode(map[string]any{"transaction": t, "branches": bs})
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"transaction": nil, "branches": []any{}})
	case "/api/dtmsvr/forceStop":
		var req struct{ Gid string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.stopped = append(f.stopped, req.Gid)
		_, _ = w.Write([]byte(`{"dtm_result":"SUCCESS"}`))
	default:
		http.NotFound(w, r)
	}
}

var gidIn = regexp.MustCompile(`data-gid="([^"]+)" data-status="([a-z]+)"`)

func gidsOf(body string) []string {
	var out []string
	for _, m := range gidIn.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+"/"+m[2])
	}
	return out
}

var nextIn = regexp.MustCompile(`id="next" href="([^"]+)"`)

func TestConsoleTransactionsFilteredAndPaged(t *testing.T) {
	f := newFakeCoordinator(100_000)
	coord := httptest.NewServer(f)
	defer coord.Close()
	_, ts := newTestServer(t, func(c *Config) { c.Dtx = []string{coord.URL + "/api/dtmsvr"}; c.PageSize = 50 })

	// A status filter pages through the whole list 50 at a time; every
	// page loads in well under 200 ms whatever the total.
	start := time.Now()
	_, body := get(t, http.DefaultClient, ts.URL+"/dtx?status=failed")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("first page of 100,000 transactions took %s", took)
	}
	got := gidsOf(body)
	if len(got) != 50 || got[0] != "g000003/failed" || got[49] != "g000493/failed" {
		t.Fatalf("page 1 of failed: %d rows %v", len(got), got)
	}
	m := nextIn.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no next page link:\n%s", body)
	}
	_, body = get(t, http.DefaultClient, ts.URL+strings.ReplaceAll(m[1], "&amp;", "&"))
	got = gidsOf(body)
	if len(got) != 50 || got[0] != "g000503/failed" {
		t.Fatalf("page 2 of failed: %v", got)
	}

	// A gid prefix (which the API does not filter) and a type.
	_, body = get(t, http.DefaultClient, ts.URL+"/dtx?type=tcc&prefix=g0012")
	got = gidsOf(body)
	var want []string
	for i := 1200; i < 1300; i++ {
		if i%4 == 1 {
			st := "succeed"
			if i%10 == 3 {
				st = "failed"
			} else if i%10 == 7 {
				st = "submitted"
			}
			want = append(want, fmt.Sprintf("g%06d/%s", i, st))
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tcc with prefix g0012:\n got %v\nwant %v", got, want)
	}

	// The detail page: branches, timings and the body, masked.
	_, body = get(t, http.DefaultClient, ts.URL+"/dtx/txn?gid=g000007")
	for _, w := range []string{`id="txn-status" class="st-submitted">submitted`, "http://busi/TransOut", "20ms", "&#34;amount&#34;:30", `id="forcestop"`} {
		if !strings.Contains(body, w) {
			t.Errorf("detail lacks %q:\n%s", w, body)
		}
	}
	if strings.Contains(body, "hunter2") {
		t.Errorf("detail shows a password from a request body")
	}
	_, done := get(t, http.DefaultClient, ts.URL+"/dtx/txn?gid=g000000")
	if strings.Contains(done, `id="forcestop"`) {
		t.Errorf("a succeeded transaction offers force-stop")
	}

	// Force-stop goes to the coordinator with the page's CSRF token.
	resp, _ := post(t, ts.URL+"/dtx/action", url.Values{"csrf": {csrfOf(t, body)}, "c": {"0"}, "gid": {"g000007"}, "action": {"forcestop"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "done") {
		t.Fatalf("force-stop: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stopped) != 1 || f.stopped[0] != "g000007" {
		t.Fatalf("coordinator saw force-stops %v", f.stopped)
	}
}

// BenchmarkTasksPage1000 loads the tasks page over 1,000 task directories.
func BenchmarkTasksPage1000(b *testing.B) {
	root := b.TempDir()
	for i := 0; i < 1000; i++ {
		writeStatus(b, root, fmt.Sprintf("task%04d", i), fakeStatus(i))
	}
	cfg := DefaultConfig()
	cfg.TaskRoots, cfg.SampleEvery = []string{root}, 0
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/tasks", nil))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// A coordinator that requires a bearer token (sluice dtx serve
// --token-file) gets the console's DtxToken; without it the page shows
// the coordinator's refusal as a banner.
func TestConsoleDtxToken(t *testing.T) {
	f := newFakeCoordinator(3)
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ctok" {
			http.Error(w, "missing or wrong token", http.StatusUnauthorized)
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer coord.Close()
	_, with := newTestServer(t, func(c *Config) { c.Dtx, c.DtxToken = []string{coord.URL}, "ctok" })
	if _, body := get(t, http.DefaultClient, with.URL+"/dtx"); len(gidsOf(body)) != 3 {
		t.Fatalf("with the token: %v\n%s", gidsOf(body), body)
	}
	_, without := newTestServer(t, func(c *Config) { c.Dtx = []string{coord.URL} })
	if _, body := get(t, http.DefaultClient, without.URL+"/dtx"); !strings.Contains(body, "HTTP 401") || !strings.Contains(body, `class="banner"`) {
		t.Fatalf("without the token: no banner naming the 401:\n%s", body)
	}
}
