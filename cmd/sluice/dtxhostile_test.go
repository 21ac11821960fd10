package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx/httpapi"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// dtxProc is one `sluice dtx serve` process, for the tests that measure or
// attack it from outside (its memory, its connection slots).
type dtxProc struct {
	cmd  *exec.Cmd
	addr string // host:port
	log  *bytes.Buffer
	mu   *sync.Mutex
	done chan error
}

// startDtx runs sluice dtx serve with a memory store on a free loopback
// port plus args, and waits until it answers. It is killed at the test's end.
func startDtx(t *testing.T, bin string, env []string, args ...string) *dtxProc {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &dtxProc{addr: "127.0.0.1:" + strconv.Itoa(port), log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	all := append([]string{"dtx", "serve", "--store", "mem://", "--listen", p.addr, "--log-level", "warn"}, args...)
	p.cmd = exec.Command(bin, all...)
	p.cmd.Env = append(os.Environ(), env...)
	w := &lockedWriter{mu: p.mu, b: p.log}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("coordinator log:\n%s", p.logText())
		}
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", p.addr)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("dtx serve exited: %v\n%s", err, p.logText())
		default:
		}
		if i > 1000 {
			t.Fatalf("dtx serve did not listen: %v\n%s", err, p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

func (p *dtxProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// rss is the process's resident set now and at its peak (VmRSS, VmHWM), in bytes.
func (p *dtxProc) rss(t *testing.T) (anon, total int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "RssAnon", "RssShmem":
			anon += n << 10
		case "VmRSS":
			total = n << 10
		}
	}
	return anon, total
}

// post sends one request on a fresh connection and returns the status,
// the Retry-After header and the body.
func (p *dtxProc) post(t *testing.T, path, auth string, body []byte) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+path, bytes.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

var (
	dtxBinOnce sync.Once
	dtxBin     string
)

// sluiceBinary is $SLUICE_TEST_BIN (make test), or the CLI built once for
// the tests of this file (each BuildSluice costs a minute on a busy
// machine). The directory is left to the OS's temporary cleanup. The tests
// run `sluice dtx serve` processes: they skip under -short.
func sluiceBinary(t *testing.T) string {
	sandboxtest.SkipShort(t)
	dtxBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-dtxhostile-")
		if err != nil {
			t.Fatal(err)
		}
		if dtxBin, err = sandboxtest.SluiceBinary(dir); err != nil {
			t.Fatal(err)
		}
	})
	if dtxBin == "" {
		t.Fatal("no sluice binary (its build failed in an earlier test)")
	}
	return dtxBin
}

var _ = sandboxtest.BuildSluice // the per-test build, for tests that kill their binary's directory

func sagaTo(gid string, urls ...string) []byte {
	var steps []string
	var pay []string
	for _, u := range urls {
		steps = append(steps, fmt.Sprintf(`{"action":%q,"compensate":%q}`, u, u))
		pay = append(pay, `"{}"`)
	}
	return []byte(fmt.Sprintf(`{"gid":%q,"trans_type":"saga","steps":[%s],"payloads":[%s]}`, gid, strings.Join(steps, ","), strings.Join(pay, ",")))
}

// TestDtxBranchHosts: link-local and metadata branch URLs are refused by
// default, --branch-hosts is an allow list, and --check-branch-urls never
// tells an anonymous caller whether a port is open: without a token a
// closed port and an open one get the same answer (issue 30: an
// unauthenticated /prepare reported which host:ports were open).
func TestDtxBranchHosts(t *testing.T) {
	bin := sluiceBinary(t)
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(c)); c.Close() }()
		}
	}()
	closedPort, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	openURL := "http://" + open.Addr().String() + "/branch"
	closedURL := fmt.Sprintf("http://127.0.0.1:%d/branch", closedPort)

	t.Run("anonymous callers learn nothing from the probe", func(t *testing.T) {
		p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN="})
		c1, _, b1 := p.post(t, "/api/dtmsvr/prepare", "", []byte(`{"gid":"open","trans_type":"msg","steps":[{"action":"`+openURL+`"}],"payloads":["{}"]}`))
		c2, _, b2 := p.post(t, "/api/dtmsvr/prepare", "", []byte(`{"gid":"closed","trans_type":"msg","steps":[{"action":"`+closedURL+`"}],"payloads":["{}"]}`))
		if c1 != c2 || b1 != b2 {
			t.Fatalf("open port: %d %s; closed port: %d %s (the difference is a port scan)", c1, b1, c2, b2)
		}
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x", "http://metadata.google.internal/computeMetadata/v1/"} {
			code, _, body := p.post(t, "/api/dtmsvr/submit", "", sagaTo("md", u))
			if code != http.StatusBadRequest || !strings.Contains(body, "--branch-hosts") {
				t.Errorf("%s: HTTP %d %s, want 400 naming --branch-hosts", u, code, body)
			}
		}
	})
	t.Run("the token holder gets the probe", func(t *testing.T) {
		p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN=tok"})
		if code, _, body := p.post(t, "/api/dtmsvr/prepare", "tok", []byte(`{"gid":"closed","trans_type":"msg","steps":[{"action":"`+closedURL+`"}],"payloads":["{}"]}`)); code != http.StatusBadRequest || !strings.Contains(body, "unreachable") {
			t.Fatalf("closed port with the token: HTTP %d %s", code, body)
		}
		if code, _, body := p.post(t, "/api/dtmsvr/prepare", "tok", []byte(`{"gid":"open","trans_type":"msg","steps":[{"action":"`+openURL+`"}],"payloads":["{}"]}`)); code != http.StatusOK {
			t.Fatalf("open port with the token: HTTP %d %s", code, body)
		}
	})
	t.Run("asking for the probe without a token is refused", func(t *testing.T) {
		cmd := exec.Command(bin, "dtx", "serve", "--store", "mem://", "--listen", "127.0.0.1:0", "--check-branch-urls")
		cmd.Env = append(os.Environ(), "SLUICE_DTX_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--token-file") {
			t.Fatalf("exit %v: %s", err, out)
		}
	})
	t.Run("an allow list", func(t *testing.T) {
		p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN="}, "--branch-hosts", "10.0.0.0/8,*.svc.local")
		if code, _, body := p.post(t, "/api/dtmsvr/submit", "", sagaTo("lo", openURL)); code != http.StatusBadRequest || !strings.Contains(body, "--branch-hosts") {
			t.Fatalf("loopback outside the list: HTTP %d %s", code, body)
		}
		if code, _, body := p.post(t, "/api/dtmsvr/prepare", "", []byte(`{"gid":"ok","trans_type":"msg","steps":[{"action":"http://busi.svc.local:8080/x"}],"payloads":["{}"]}`)); code != http.StatusOK {
			t.Fatalf("a listed pattern: HTTP %d %s", code, body)
		}
	})
}

// memorySampler polls the process's RSS until stop, keeping the peak.
// memorySampler samples the coordinator's resident memory every 10 ms
// until stop, which returns the peak. It counts anonymous and shared
// memory, not file pages: the bolt store is a memory-mapped file whose
// pages the kernel reclaims at will, and every saga a flood gets served is
// stored there (a busy CI run served 262 MB of them and VmRSS read 928 MB).
// The peak of VmRSS is logged beside it.
func memorySampler(t *testing.T, p *dtxProc) (stop func() int64) {
	done := make(chan struct{})
	peak := make(chan [2]int64, 1)
	go func() {
		var max [2]int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			anon, total := p.rss(t)
			max[0], max[1] = maxInt64(max[0], anon), maxInt64(max[1], total)
			select {
			case <-done:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		m := <-peak
		t.Logf("peak resident memory: %d MB anonymous, %d MB with file pages (VmRSS)", m[0]>>20, m[1]>>20)
		return m[0]
	}
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// bigSaga is a valid saga of one step whose action needs no call (an
// empty URL always succeeds, as in dtm), with a payload of n bytes.
func bigSaga(gid string, n int) []byte {
	pay := strings.Repeat("x", n)
	return []byte(`{"gid":"` + gid + `","trans_type":"saga","steps":[{"action":"","compensate":""}],"payloads":["` + pay + `"]}`)
}

// flood sends bodies concurrently, one connection each, and counts the
// answers by status; an HTTP answer other than 200 and 503 (with
// Retry-After) fails, and so does a connection closed without an answer.
func flood(t *testing.T, p *dtxProc, bodies [][]byte) (ok, busy int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, b := range bodies {
		wg.Add(1)
		go func(i int, b []byte) {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/api/dtmsvr/submit", bytes.NewReader(b))
			c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Do(req)
			if err != nil {
				// Every client is answered: the slots close no connection
				// that has not had FreshGrace to send its request, and the
				// budget answers 503 rather than dropping one.
				t.Errorf("client %d: no answer: %v", i, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case resp.StatusCode == http.StatusOK:
				ok++
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
				busy++
			default:
				t.Errorf("client %d: HTTP %d %.200s", i, resp.StatusCode, body)
			}
		}(i, b)
	}
	close(start)
	wg.Wait()
	return ok, busy
}

// TestDtxMemoryUnderLargeBodies: ten concurrent 15 MB submits keep the
// coordinator's resident memory under 512 MB, and a flood of 1,000 clients
// is shed: past the in-flight body budget a request is answered 503 with
// Retry-After; the coordinator serves a plain request afterwards (issue 30: ten concurrent 15 MB submits
// took it to 960 MB). RSS is read from /proc while the load runs. Without
// the budget (--max-inflight-body 0) the flood's peak was 4 GB.
func TestDtxMemoryUnderLargeBodies(t *testing.T) {
	bin := sluiceBinary(t)
	const limit = 512 << 20
	t.Run("ten 15 MB submits", func(t *testing.T) {
		p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN="}, "--store", "bolt://"+filepath.Join(t.TempDir(), "dtx.db"))
		var bodies [][]byte
		for i := 0; i < 10; i++ {
			bodies = append(bodies, bigSaga(fmt.Sprintf("big-%d", i), 15<<20))
		}
		stop := memorySampler(t, p)
		ok, busy := flood(t, p, bodies)
		peak := stop()
		t.Logf("ten 15 MB submits: %d served, %d answered 503; peak RSS %d MB", ok, busy, peak>>20)
		if peak > limit {
			t.Errorf("peak RSS %d MB, want under %d MB", peak>>20, limit>>20)
		}
		if ok == 0 {
			t.Error("no large submit was served")
		}
		if code, _, body := p.post(t, "/api/dtmsvr/submit", "", bigSaga("after-big", 10)); code != http.StatusOK {
			t.Fatalf("a plain submit afterwards: HTTP %d %s", code, body)
		}
	})
	t.Run("1000 clients", func(t *testing.T) {
		// The header timeout is raised past the test: draining 900-odd
		// refused 1 MB bodies on a starved machine (load 35 on 2 cores)
		// delayed the coordinator's first read of other connections past
		// 10 s, and a read after its deadline fails even with the header
		// waiting in the socket. Measured: those closures went with
		// --read-header-timeout 2m and stayed with
		// --max-conns-per-client 0. The header timeout has its own tests.
		p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN="}, "--store", "bolt://"+filepath.Join(t.TempDir(), "dtx.db"), "--read-header-timeout", "2m")
		pay := bigSaga("GID", 1000<<10)
		var bodies [][]byte
		for i := 0; i < 1000; i++ {
			bodies = append(bodies, bytes.Replace(pay, []byte("GID"), []byte(fmt.Sprintf("flood-%d", i)), 1))
		}
		stop := memorySampler(t, p)
		ok, busy := flood(t, p, bodies)
		peak := stop()
		t.Logf("1000 clients with 1 MB submits: %d served, %d answered 503; peak RSS %d MB", ok, busy, peak>>20)
		// A heap profile of the flood (issue 30) showed what held the
		// memory besides the budgeted bodies: a copy of every payload per
		// branch, a whole batch's log records held at once (and doubled
		// by append), the log's aligned write buffer kept at 1.5 times the
		// largest batch for the life of the process, a checkpoint writing
		// all its states in one bolt transaction, and an overlay growing
		// while a slow checkpoint ran. Each is bounded now.
		if peak > limit {
			t.Errorf("peak RSS %d MB, want under %d MB", peak>>20, limit>>20)
		}
		if ok+busy != len(bodies) {
			t.Errorf("%d of %d clients answered", ok+busy, len(bodies))
		}
		if busy == 0 {
			t.Error("no submit was answered 503: the in-flight budget did not shed the flood")
		}
		if ok == 0 {
			t.Error("no submit was served")
		}
		if code, _, body := p.post(t, "/api/dtmsvr/submit", "", bigSaga("after-flood", 10)); code != http.StatusOK {
			t.Fatalf("a plain submit afterwards: HTTP %d %s", code, body)
		}
	})
}

// TestDtxIdleSockets: 10,000 idle sockets from one address (fewer if the
// file limit does not allow them) fill every connection slot; a real client
// from another address, and one from the same address, are each answered
// while the sockets are held open. The header timeout is set far beyond
// the test, so the server frees no slot by timing a socket out: only by
// closing an idle one for room (issue 30: 10,000 idle sockets delayed real
// clients by about 10 s, the header timeout; before the connection slots
// they waited here for ever).
func TestDtxIdleSockets(t *testing.T) {
	bin := sluiceBinary(t)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) //nolint:errcheck // restores the test process's limit
			lim = raised
		}
	}
	n := 10000
	if max := int(lim.Cur) - 500; max < n {
		n = max // the test process holds the sockets; the coordinator has its own limit
	}
	if n < 1000 {
		t.Skipf("RLIMIT_NOFILE %d leaves too few sockets", lim.Cur)
	}
	p := startDtx(t, bin, []string{"SLUICE_DTX_TOKEN="}, "--max-conns", strconv.Itoa(n), "--read-header-timeout", "1h")
	idle := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for len(idle) < n {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("idle socket %d: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	t.Logf("%d idle sockets open from 127.0.0.1", n)
	for _, local := range []string{"127.0.0.2", "127.0.0.1"} {
		// A client from the idle sockets' own address may be refused while
		// every one of that address's connections is younger than the
		// slots' grace for new connections (1 s: httpapi.DefaultFreshGrace),
		// which spares them; it is answered once the oldest has aged.
		start := time.Now()
		for attempt := 1; ; attempt++ {
			code, err := newGidOn(p.addr, local)
			if err == nil {
				if code != http.StatusOK {
					t.Fatalf("real client from %s: HTTP %d", local, code)
				}
				t.Logf("real client from %s answered after %v (attempt %d)", local, time.Since(start).Round(time.Millisecond), attempt)
				break
			}
			if local != "127.0.0.1" || time.Since(start) > httpapi.DefaultFreshGrace+5*time.Second {
				t.Fatalf("real client from %s not answered while %d idle sockets are open: %v", local, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// newGidOn asks for a gid on a new connection from the local address.
func newGidOn(addr, local string) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// The deadline only turns a wait into a failure report: the slot is
	// made at accept, or the connection refused (the header timeout is an
	// hour).
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	fmt.Fprintf(c, "GET /api/dtmsvr/newGid HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
