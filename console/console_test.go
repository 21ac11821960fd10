package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
)

// fakeActions records the actions the console asks for.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeActions) rec(s string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return "did " + s, nil
}

func (f *fakeActions) Pause(_ context.Context, dir, task string) (string, error) {
	return f.rec("pause " + task)
}
func (f *fakeActions) Resume(_ context.Context, dir, task string) (string, error) {
	return f.rec("resume " + task)
}
func (f *fakeActions) Stop(_ context.Context, dir, task string) (string, error) {
	return f.rec("stop " + task)
}
func (f *fakeActions) Skip(_ context.Context, dir, task, gtid, pos string) (string, error) {
	return f.rec("skip " + task + " " + gtid + pos)
}
func (f *fakeActions) Replace(_ context.Context, dir, task, gtid, pos string, sql []string) (string, error) {
	return f.rec("replace " + task + " " + gtid + pos + " " + strings.Join(sql, ";"))
}

func (f *fakeActions) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func newTestServer(t *testing.T, mod func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SampleEvery = 0
	cfg.SourceTimeout = 500 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirect.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfIn = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := csrfIn.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", html)
	}
	return m[1]
}

func TestConsoleListenNeedsTokenOffLoopback(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Listen != "127.0.0.1:8686" {
		t.Fatalf("default listen %q, want loopback 127.0.0.1:8686", cfg.Listen)
	}
	for _, addr := range []string{"0.0.0.0:8686", ":8686", "10.1.2.3:8686"} {
		cfg.Listen = addr
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--token-file") {
			t.Errorf("listen %s without a token: %v, want an error naming --token-file", addr, err)
		}
		cfg.Token = "t0k3n"
		if err := cfg.Validate(); err != nil {
			t.Errorf("listen %s with a token: %v", addr, err)
		}
		cfg.Token = ""
	}
	for _, addr := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		cfg.Listen = addr
		if err := cfg.Validate(); err != nil {
			t.Errorf("loopback %s: %v", addr, err)
		}
	}
}

func TestConsoleTokenWrong401(t *testing.T) {
	_, ts := newTestServer(t, func(c *Config) { c.Token = "s3cret-token" })
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Cookie", tokenCookie + "=wrong"}} {
		if code, _ := get(t, noRedirect, ts.URL+"/tasks", h...); code != http.StatusUnauthorized {
			t.Errorf("headers %v: %d, want 401", h, code)
		}
	}
	if code, _ := get(t, noRedirect, ts.URL+"/tasks?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("?token=wrong: %d, want 401", code)
	}
	if code, _ := get(t, noRedirect, ts.URL+"/tasks", "Authorization", "Bearer s3cret-token"); code != http.StatusOK {
		t.Errorf("bearer token: %d, want 200", code)
	}
	// ?token= sets a cookie and redirects to the page without it.
	resp, err := noRedirect.Get(ts.URL + "/tasks?token=s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "token") {
		t.Fatalf("?token=: %d to %q, want 303 to the page without the token", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == tokenCookie {
			cookie = c.Name + "=" + c.Value
		}
	}
	if code, _ := get(t, noRedirect, ts.URL+"/tasks", "Cookie", cookie); code != http.StatusOK {
		t.Errorf("with the cookie: %d, want 200", code)
	}
}

// writeStatus makes a task directory under root with status s.
func writeStatus(t testing.TB, root, name string, s replicate.Status) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.Task = name
	// Written without replicate.WriteStatus's fsync: 1,000 of them would
	// take most of a test on a busy disk.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, replicate.StatusFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hold makes dir's task.lock held, as by a running task with pid.
func hold(t *testing.T, dir string, pid string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "task.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

func TestConsoleForgedPost403(t *testing.T) {
	root := t.TempDir()
	dir := writeStatus(t, root, "t1", replicate.Status{Stage: replicate.StageRunning})
	hold(t, dir, "4242")
	fa := &fakeActions{}
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root}; c.Actions = fa })
	for _, form := range []url.Values{
		{"dir": {dir}, "action": {"stop"}},
		{"dir": {dir}, "action": {"stop"}, "csrf": {"0123456789abcdef"}},
	} {
		if resp, _ := post(t, ts.URL+"/task/action", form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %v: %d, want 403", form, resp.StatusCode)
		}
	}
	if resp, _ := post(t, ts.URL+"/dtx/action", url.Values{"gid": {"g"}, "action": {"forcestop"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("forged force-stop: %d, want 403", resp.StatusCode)
	}
	if c := fa.list(); len(c) != 0 {
		t.Fatalf("forged POSTs ran actions: %v", c)
	}
	_, page := get(t, http.DefaultClient, ts.URL+"/task?dir="+url.QueryEscape(dir))
	resp, _ := post(t, ts.URL+"/task/action", url.Values{"dir": {dir}, "action": {"stop"}, "csrf": {csrfOf(t, page)}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST with the page's CSRF token: %d, want 303", resp.StatusCode)
	}
	if c := fa.list(); len(c) != 1 || c[0] != "stop t1" {
		t.Fatalf("actions %v, want [stop t1]", c)
	}
	// A directory that is not a task under --tasks is refused, token or not.
	resp, _ = post(t, ts.URL+"/task/action", url.Values{"dir": {t.TempDir()}, "action": {"stop"}, "csrf": {csrfOf(t, page)}})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST for a directory outside --tasks: %d, want 404", resp.StatusCode)
	}
}

func TestConsoleUnreachableSourcesBanner(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there now
	_, ts := newTestServer(t, func(c *Config) {
		c.TaskRoots = []string{t.TempDir()}
		c.Dtx = []string{deadURL}
		c.Etcd = []string{deadURL}
		c.Serve = []string{strings.TrimPrefix(deadURL, "http://")}
	})
	for path, want := range map[string]string{"/dtx": "coordinator " + deadURL + " unreachable", "/workers": "etcd", "/serve": "binlog service"} {
		code, body := get(t, http.DefaultClient, ts.URL+path)
		if code != http.StatusOK {
			t.Errorf("%s: %d, want the page (200) with a banner", path, code)
		}
		if !strings.Contains(body, `class="banner" role="alert"`) || !strings.Contains(body, want) {
			t.Errorf("%s: no banner naming %q:\n%s", path, want, body)
		}
		if !strings.Contains(body, "</html>") {
			t.Errorf("%s: the page did not render to its end", path)
		}
	}
}

func TestConsoleTasksWorstFirst(t *testing.T) {
	root := t.TempDir()
	writeStatus(t, root, "clean", replicate.Status{Stage: replicate.StageStopped})
	writeStatus(t, root, "gone", replicate.Status{Stage: replicate.StageRunning, LagSeconds: 1})
	slow := writeStatus(t, root, "slow", replicate.Status{Stage: replicate.StageRunning, LagSeconds: 90})
	hold(t, slow, "4243")
	fast := writeStatus(t, root, "fast", replicate.Status{Stage: replicate.StageRunning, LagSeconds: 0.2})
	hold(t, fast, "4244")
	writeStatus(t, root, "broken", replicate.Status{Stage: replicate.StageFailed,
		Error: (&sluice.Error{Op: "apply GTID 0-1-42", Err: sluice.ErrSchemaMismatch, Hint: "add the column on the target"}).Error()})
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root} })
	_, body := get(t, http.DefaultClient, ts.URL+"/tasks")
	var order []string
	for _, m := range regexp.MustCompile(`data-task="([a-z]+)"`).FindAllStringSubmatch(body, -1) {
		order = append(order, m[1])
	}
	if want := "broken gone slow fast clean"; strings.Join(order, " ") != want {
		t.Fatalf("order %v, want %s", order, want)
	}
	if !strings.Contains(body, "gone (last seen running)") || !strings.Contains(body, "pid 4243") {
		t.Errorf("stage of a task without its process or worker of a running one not shown:\n%s", body)
	}
	if !strings.Contains(body, "<strong>Fix:</strong> add the column on the target") {
		t.Errorf("the failed task's fix is not shown:\n%s", body)
	}
}

func TestConsoleMasksPasswords(t *testing.T) {
	for in, secret := range map[string]string{
		"connect root:hunter2@tcp(10.0.0.1:3306)/app: refused": "hunter2",
		"dsn app:p%40ss@10.0.0.1:3306/db":                      "p%40ss",
		"source password: hunter3 rejected":                    "hunter3",
		`{"password":"hunter4"}`:                               "hunter4",
		"token=abc123 given":                                   "abc123",
	} {
		out := Mask(in)
		if strings.Contains(out, secret) || !strings.Contains(out, "***") {
			t.Errorf("Mask(%q) = %q, shows the secret", in, out)
		}
	}
	if out := Mask("apply GTID 0-1-42 at mysql-bin.000002:400"); out != "apply GTID 0-1-42 at mysql-bin.000002:400" {
		t.Errorf("Mask changed a line without a secret: %q", out)
	}
	root := t.TempDir()
	dir := writeStatus(t, root, "t", replicate.Status{Stage: replicate.StageFailed, Error: "source root:hunter2@tcp(10.0.0.1:3306)/ unreachable (fix: check the password)"})
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root} })
	for _, p := range []string{"/tasks", "/task?dir=" + url.QueryEscape(dir)} {
		if _, body := get(t, http.DefaultClient, ts.URL+p); strings.Contains(body, "hunter2") {
			t.Errorf("%s shows the password:\n%s", p, body)
		}
	}
}

func TestConsoleSkipAsksConfirmation(t *testing.T) {
	root := t.TempDir()
	dir := writeStatus(t, root, "t1", replicate.Status{Stage: replicate.StageFailed,
		Error: "apply GTID 0-1-42 at mysql-bin.000002:400: Duplicate entry '7' for key 'PRIMARY' on app.t (fix: sluice skip --gtid 0-1-42)"})
	fa := &fakeActions{}
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root}; c.Actions = fa })
	_, page := get(t, http.DefaultClient, ts.URL+"/task?dir="+url.QueryEscape(dir))
	if !strings.Contains(page, `name="gtid" value="0-1-42"`) || !strings.Contains(page, `name="position" value="mysql-bin.000002:400"`) {
		t.Fatalf("the skip form is not filled with the statement the error names:\n%s", page)
	}
	if strings.Contains(page, `id="pause"`) || strings.Contains(page, `id="stop"`) {
		t.Errorf("a task without a process offers pause or stop")
	}
	csrf := csrfOf(t, page)
	form := url.Values{"csrf": {csrf}, "dir": {dir}, "action": {"skip"}, "gtid": {"0-1-42"}, "position": {"mysql-bin.000002:400"}, "scope": {"transaction"}}
	resp, confirm := post(t, ts.URL+"/task/handle", form)
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, "Duplicate entry &#39;7&#39;") || !strings.Contains(confirm, `name="confirm" value="yes"`) {
		t.Fatalf("skip did not ask for confirmation with the statement: %d\n%s", resp.StatusCode, confirm)
	}
	if c := fa.list(); len(c) != 0 {
		t.Fatalf("skip ran before it was confirmed: %v", c)
	}
	form = url.Values{"csrf": {csrf}, "dir": {dir}, "action": {"replace"}, "gtid": {"0-1-42"}, "sql": {"ALTER TABLE app.t ADD COLUMN c INT\nDROP TABLE app.u"}, "confirm": {"yes"}}
	if resp, _ := post(t, ts.URL+"/task/handle", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed replace: %d, want 303", resp.StatusCode)
	}
	if c := fa.list(); len(c) != 1 || c[0] != "replace t1 0-1-42 ALTER TABLE app.t ADD COLUMN c INT;DROP TABLE app.u" {
		t.Fatalf("actions %v", c)
	}
}

func TestConsoleStageTimesAndHandles(t *testing.T) {
	root := t.TempDir()
	s := replicate.Status{Stage: replicate.StageStopped, RelayBytes: 5e6, RelayFiles: 3,
		Apply: &replicate.ApplyStatus{Stages: map[string]replicate.StageTime{"apply": {Goroutines: 4, Seconds: map[string]float64{"busy": 12.5}}}}}
	dir := writeStatus(t, root, "t1", s)
	if err := replicate.AddHandle(dir, replicate.Handle{GTID: "0-1-9", Action: "skip", Added: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root} })
	_, body := get(t, http.DefaultClient, ts.URL+"/task?dir="+url.QueryEscape(dir))
	for _, want := range []string{"busy 12.5 s", "3 files, 5.0 MB", "skip GTID 0-1-9 (pending)"} {
		if !strings.Contains(body, want) {
			t.Errorf("task page lacks %q:\n%s", want, body)
		}
	}
}

// fakeStatus is a task's status with a spread of stages and lags.
func fakeStatus(i int) replicate.Status {
	s := replicate.Status{Stage: replicate.StageStopped, LagSeconds: float64(i % 97), TxnsPerSec: float64(i % 13),
		Source: sluice.Position{File: "mysql-bin.000003", Pos: uint32(1000 + i)}, Applied: sluice.Position{File: "mysql-bin.000003", Pos: uint32(900 + i)}}
	if i%50 == 0 {
		s.Stage, s.Error = replicate.StageFailed, fmt.Sprintf("apply GTID 0-1-%d: Duplicate entry (fix: sluice skip --gtid 0-1-%d)", i, i)
	}
	return s
}

// The tasks page over 1,000 task directories: one page of rows, the
// worst first, within the 200 ms (with a margin for a shared
// machine: the test fails at 15 times that; the benchmark measures).
func TestConsoleTasksPage1000(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 1000; i++ {
		writeStatus(t, root, fmt.Sprintf("task%04d", i), fakeStatus(i))
	}
	_, ts := newTestServer(t, func(c *Config) { c.TaskRoots = []string{root} })
	get(t, http.DefaultClient, ts.URL+"/tasks") // warm the page cache
	start := time.Now()
	code, body := get(t, http.DefaultClient, ts.URL+"/tasks")
	took := time.Since(start)
	t.Logf("tasks page over 1,000 tasks: %s", took)
	if code != http.StatusOK || took > 3*time.Second {
		t.Fatalf("tasks page: %d in %s", code, took)
	}
	rows := regexp.MustCompile(`data-task="(task\d+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != 100 || !strings.Contains(body, "page 1 of 10") {
		t.Fatalf("page 1: %d rows, first %v", len(rows), rows[:1])
	}
	// The 20 failed tasks come first, the longest lag of them first
	// (task0950 has lag 950%97=77).
	if rows[0][1] != "task0950" || rows[1][1] != "task0850" {
		t.Fatalf("first row %s", rows[0][1])
	}
	_, p10 := get(t, http.DefaultClient, ts.URL+"/tasks?page=10")
	if n := len(regexp.MustCompile(`data-task="`).FindAllString(p10, -1)); n != 100 {
		t.Fatalf("page 10: %d rows", n)
	}
}

func writeFile(t testing.TB, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
