package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/console"
	"github.com/sluice-db/sluice/replicate"
)

// The console's skip and pause run sluice skip's and sluice pause's code:
// the handle lands in the task's handle log, and what the CLI refuses the
// page refuses with the same words.
func TestConsoleRunsCLIActions(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := replicate.WriteStatus(dir, replicate.Status{Task: "t1", Stage: replicate.StageFailed,
		Error: "apply GTID 0-1-42 at mysql-bin.000002:400: Duplicate entry '7' for key 'PRIMARY' (fix: sluice skip --gtid 0-1-42)"}); err != nil {
		t.Fatal(err)
	}
	cfg := console.DefaultConfig()
	cfg.TaskRoots, cfg.Actions, cfg.SampleEvery = []string{root}, cliActions{}, 0
	s, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/task?dir=" + url.QueryEscape(dir))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token:\n%s", b)
	}
	csrf := string(m[1])
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(path string, f url.Values) string {
		t.Helper()
		f.Set("csrf", csrf)
		f.Set("dir", dir)
		resp, err := noFollow.PostForm(ts.URL+path, f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		return loc.Query().Get("notice")
	}
	// A GTID the error does not name: recordHandle refuses it.
	if n := do("/task/handle", url.Values{"action": {"skip"}, "gtid": {"0-1-43"}, "confirm": {"yes"}}); !strings.Contains(n, "does not name 0-1-43") {
		t.Fatalf("skip of another GTID: notice %q, want the CLI's refusal", n)
	}
	if n := do("/task/handle", url.Values{"action": {"skip"}, "gtid": {"0-1-42"}, "confirm": {"yes"}}); !strings.Contains(n, "recorded skip GTID 0-1-42") {
		t.Fatalf("skip: notice %q", n)
	}
	hs, err := replicate.ReadHandles(dir)
	if err != nil || len(hs) != 1 || hs[0].GTID != "0-1-42" || hs[0].Action != "skip" {
		t.Fatalf("handle log %+v, %v: want the skip of 0-1-42", hs, err)
	}
	if n := do("/task/action", url.Values{"action": {"pause"}}); !strings.Contains(n, "no process runs the task") {
		t.Fatalf("pause of a task without a process: notice %q", n)
	}
}
