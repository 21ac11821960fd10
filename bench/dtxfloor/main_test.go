package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestFloorWritesThenCallsThenWrites checks that the floor does what the
// benchmark's figures rely on: a synced write before the first action, the
// actions in order with their payloads, the second write before the answer,
// and a FAILURE passed back. The business service is a real HTTP server.
func TestFloorWritesThenCallsThenWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floor.log")
	fl, err := newFloor(2, path)
	if err != nil {
		t.Skipf("no O_DIRECT file here: %v", err)
	}
	var mu sync.Mutex
	var calls []string
	busi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, r.URL.Path+" "+string(body)+" writes="+strconv.FormatInt(fl.next.Load(), 10))
		mu.Unlock()
		if r.URL.Path == "/Fail" {
			_, _ = w.Write([]byte(`{"dtm_result":"FAILURE"}`))
			return
		}
		_, _ = w.Write([]byte(`{"dtm_result":"SUCCESS"}`))
	}))
	defer busi.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = fl.serveListener(ln) }()
	submit := func(gid, second string) (int, string) {
		body := `{"gid":"` + gid + `","trans_type":"saga","wait_result":true,"steps":[{"action":"` + busi.URL + `/TransOut"},{"action":"` + busi.URL + second + `"}],"payloads":["p1","p2"]}`
		resp, err := http.Post("http://"+ln.Addr().String()+"/api/dtmsvr/submit", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := submit("gid-one", "/TransIn"); code != 200 || !strings.Contains(body, "SUCCESS") {
		t.Fatalf("submit answered %d %s", code, body)
	}
	want := []string{"/TransOut p1 writes=1", "/TransIn p2 writes=1"}
	if strings.Join(calls, "|") != strings.Join(want, "|") {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	if n := fl.next.Load(); n != 2 {
		t.Fatalf("%d synced writes for one saga, want 2", n)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data[block:3*block], []byte("gid-one")) {
		t.Fatal("the log's blocks 1 and 2 do not hold the saga's gid")
	}
	if code, body := submit("gid-two", "/Fail"); code == 200 || !strings.Contains(body, "FAILURE") {
		t.Fatalf("a failed action answered %d %s", code, body)
	}
	if n := fl.next.Load(); n != 3 {
		t.Fatalf("%d synced writes after a failed saga, want 3 (no outcome write)", n)
	}
}
