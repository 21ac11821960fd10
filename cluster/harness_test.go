package cluster_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice/cluster"
	"github.com/sluice-db/sluice/internal/fence"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

var (
	etcd     *sandbox.Etcd
	src, dst *sandbox.Instance
	bin      string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here needs etcd, MariaDB and the sluice binary.
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

// skipShort skips a test under -short (make test-unit).
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs etcd, MariaDB sandboxes and worker processes")
	}
}

func run(m *testing.M) int {
	e, stop, err := sandboxtest.NewEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	etcd = e
	dir, err := os.MkdirTemp("", "sluice-cluster-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin, err = sandboxtest.SluiceBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &src}, sandboxtest.Want{Name: "dst", Inst: &dst})
}

// harness is one test's cluster: its own key prefix in the shared etcd,
// its own schemas on the shared source and target.
type harness struct {
	t       *testing.T
	prefix  string // etcd prefix and schema prefix
	tasks   []string
	srcDB   *sql.DB
	dstDB   *sql.DB
	store   *cluster.Store
	dir     string
	proxies *toxiproxy.ApiServer

	mu      sync.Mutex
	workers map[string]*workerProc
}

type workerProc struct {
	name  string
	cmd   *exec.Cmd
	out   *sandboxtest.SyncBuffer
	proxy *toxiproxy.Proxy
	done  chan struct{}
}

var nextHarness atomic.Int64

func newHarness(t *testing.T, ntasks int) *harness {
	t.Helper()
	h := &harness{t: t, prefix: fmt.Sprintf("c%d_%d", os.Getpid()%10000, nextHarness.Add(1)), dir: t.TempDir(), workers: map[string]*workerProc{}}
	h.srcDB = sandboxtest.MustOpen(t, src, "")
	h.dstDB = sandboxtest.MustOpen(t, dst, "")
	h.srcDB.SetMaxOpenConns(8)
	h.proxies = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	for i := 0; i < ntasks; i++ {
		db := fmt.Sprintf("%s_%d", h.prefix, i)
		for _, c := range []*sql.DB{h.srcDB, h.dstDB} {
			sandboxtest.MustExec(t, c, "CREATE DATABASE "+db,
				"CREATE TABLE "+db+".acct (id INT PRIMARY KEY, bal BIGINT NOT NULL, note VARCHAR(64))",
				"CREATE TABLE "+db+".ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, acct INT NOT NULL, amount INT NOT NULL)")
		}
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + db + ".acct VALUES ")
		for a := 0; a < 50; a++ {
			if a > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(%d, 1000, 'a%d')", a, a)
		}
		// The accounts exist on both sides before the task starts.
		sandboxtest.MustExec(t, h.dstDB, sb.String())
		sandboxtest.MustExec(t, h.srcDB, sb.String())
		h.tasks = append(h.tasks, db)
	}
	s, err := cluster.Open(context.Background(), h.clusterConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h.store = s
	var gtid string
	if err := h.srcDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	for _, name := range h.tasks {
		yaml := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root}
target: {host: 127.0.0.1, port: %d, user: root}
tables: {include: ["%s.*"]}
incremental: {gtid-set: "%s", worker-count: 4, batch: 50, metrics-addr: ""}
`, name, src.Port, dst.Port, name, gtid)
		f := filepath.Join(h.dir, name+".yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		h.sluice("task", "add", "--etcd", etcd.Endpoint(), "--etcd-prefix", "/"+h.prefix, "--config", f)
	}
	t.Cleanup(func() {
		h.mu.Lock()
		ws := h.workers
		h.mu.Unlock()
		for _, w := range ws {
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() || os.Getenv("SLUICE_CLUSTER_LOGS") == "1" {
			for n, w := range ws {
				t.Logf("worker %s output (tail):\n%s", n, tail(w.out.String(), 200))
			}
		}
	})
	return h
}

func (h *harness) clusterConfig() cluster.Config {
	c := cluster.DefaultConfig(etcd.Endpoint())
	c.Prefix = "/" + h.prefix
	return c
}

// sluice runs a sluice command to its end and returns its output.
func (h *harness) sluice(args ...string) string {
	h.t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startWorker runs `sluice worker` as its own process, talking to etcd
// through a proxy of its own (to cut it off from etcd alone).
func (h *harness) startWorker(name string, args ...string) *workerProc {
	h.t.Helper()
	h.mu.Lock()
	w := h.workers[name]
	h.mu.Unlock()
	if w == nil {
		w = &workerProc{name: name}
		w.proxy = toxiproxy.NewProxy(h.proxies, h.prefix+name, "127.0.0.1:0", etcd.Addr())
		if err := w.proxy.Start(); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(w.proxy.Stop)
		w.out = &sandboxtest.SyncBuffer{}
	}
	w.cmd = exec.Command(bin, append([]string{"worker", "--etcd", "http://" + w.proxy.Listen, "--etcd-prefix", "/" + h.prefix,
		"--name", name, "--dir", filepath.Join(h.dir, name)}, args...)...)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	w.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(w.cmd, w.done)
	h.mu.Lock()
	h.workers[name] = w
	h.mu.Unlock()
	return w
}

// kill9 kills a worker process and waits until it is gone.
func (h *harness) kill9(name string) {
	h.t.Helper()
	h.mu.Lock()
	w := h.workers[name]
	h.mu.Unlock()
	_ = w.cmd.Process.Kill()
	<-w.done
}

func (h *harness) pid(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.workers[name]; w != nil {
		select {
		case <-w.done:
			return 0
		default:
			return w.cmd.Process.Pid
		}
	}
	return 0
}

// owners reads every task's fencing record.
func (h *harness) owners() map[string]cluster.TaskStatus {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := h.store.Load(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]cluster.TaskStatus{}
	for _, ts := range st.Tasks {
		m[ts.Name] = ts
	}
	return m
}

// running reports a task's owner if its published stage is running.
func running(ts cluster.TaskStatus) (string, bool) {
	var p struct {
		Worker    string `json:"worker"`
		Stage     string `json:"stage"`
		Replicate struct {
			Stage string `json:"stage"`
		} `json:"replicate"`
	}
	if len(ts.Status) == 0 || json.Unmarshal(ts.Status, &p) != nil {
		return "", false
	}
	return p.Worker, p.Stage == "running" && p.Replicate.Stage == "running" && p.Worker == ts.Owner
}

// waitFor is sandboxtest.Eventually that returns how long cond took to hold.
func (h *harness) waitFor(what string, timeout time.Duration, cond func() bool) time.Duration {
	h.t.Helper()
	start := time.Now()
	sandboxtest.Eventually(h.t, timeout, what, cond)
	return time.Since(start)
}

// rows is the number of ledger rows of a task on the target: it grows as
// the task applies.
func (h *harness) rows(taskName string) int64 {
	var n int64
	_ = h.dstDB.QueryRow("SELECT COUNT(*) FROM " + taskName + ".ledger").Scan(&n)
	return n
}

// load writes transactions to every task's schema until stop: each moves
// an amount between two accounts and records it in the ledger, so a lost
// or doubled transaction shows in the checksums.
func (h *harness) load(seed int64) (stop func() int64) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(g)))
			for ctx.Err() == nil {
				db := h.tasks[rng.Intn(len(h.tasks))]
				a, b, amt := rng.Intn(50), rng.Intn(50), rng.Intn(100)+1
				// Not ctx: a stop while a commit is in flight would cut
				// the connection and leave a transaction that committed
				// but was not counted.
				tx, err := h.srcDB.BeginTx(context.Background(), nil)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				// Stop at the first error: after a deadlock InnoDB has
				// rolled the transaction back, and a next statement would
				// run in autocommit, committing an uncounted insert.
				_, err = tx.Exec("UPDATE "+db+".acct SET bal = bal - ?, note = ? WHERE id = ?", amt, fmt.Sprintf("to %d", b), a)
				if err == nil {
					_, err = tx.Exec("UPDATE "+db+".acct SET bal = bal + ? WHERE id = ?", amt, b)
				}
				if err == nil {
					_, err = tx.Exec("INSERT INTO "+db+".ledger (acct, amount) VALUES (?, ?)", a, amt)
				}
				if err != nil {
					_ = tx.Rollback()
					if retryable(err) {
						continue // two transfers crossed: InnoDB chose this one to roll back
					}
					if ctx.Err() == nil {
						errs <- fmt.Errorf("load: %v", err)
					}
					return
				}
				if rng.Intn(10) == 0 {
					_, _ = tx.Exec("DELETE FROM " + db + ".ledger ORDER BY id LIMIT 1")
				}
				if err := tx.Commit(); err != nil {
					if retryable(err) {
						continue
					}
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				n.Add(1)
			}
		}(g)
	}
	return func() int64 {
		cancel()
		wg.Wait()
		select {
		case err := <-errs:
			h.t.Fatalf("write load: %v", err)
		default:
		}
		return n.Load()
	}
}

// checksums compares CHECKSUM TABLE of every table on both sides.
func (h *harness) differences() []string {
	var diff []string
	for _, db := range h.tasks {
		for _, tb := range []string{"acct", "ledger"} {
			var sum [2]sql.NullInt64
			for i, c := range []*sql.DB{h.srcDB, h.dstDB} {
				var name string
				if err := c.QueryRow("CHECKSUM TABLE "+db+"."+tb+" EXTENDED").Scan(&name, &sum[i]); err != nil {
					h.t.Fatal(err)
				}
			}
			if sum[0] != sum[1] {
				diff = append(diff, fmt.Sprintf("%s.%s source %d target %d", db, tb, sum[0].Int64, sum[1].Int64))
			}
		}
	}
	return diff
}

// waitEqual waits until every table is equal on both sides.
func (h *harness) waitEqual(timeout time.Duration) {
	h.t.Helper()
	var d []string
	sandboxtest.Eventually(h.t, timeout, "every table equal on both sides", func() bool {
		d = h.differences()
		return len(d) == 0
	}, func() string { return "differences: " + strings.Join(d, "; ") })
}

// retryable: a deadlock or a lock wait timeout of the write load.
func retryable(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "Error 1213") || strings.Contains(err.Error(), "Error 1205"))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// auditor samples the target's locks: for each task, the worker processes
// whose sessions hold the task's apply slots or its owner lock. Two
// processes at once would be two appliers of one task.
type auditor struct {
	h       *harness
	stop    chan struct{}
	done    chan struct{}
	samples atomic.Int64
	mu      sync.Mutex
	bad     []string
	holders map[string]map[int]bool // task -> pids seen in the last sample
}

func (h *harness) audit() *auditor {
	a := &auditor{h: h, stop: make(chan struct{}), done: make(chan struct{}), holders: map[string]map[int]bool{}}
	db := h.dstDB
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			a.sample(db)
		}
	}()
	return a
}

func (a *auditor) sample(db *sql.DB) {
	// Client port -> worker pid, from /proc (the workers are children).
	ports := map[int]int{}
	a.h.mu.Lock()
	var pids []int
	for _, w := range a.h.workers {
		select {
		case <-w.done:
		default:
			pids = append(pids, w.cmd.Process.Pid)
		}
	}
	a.h.mu.Unlock()
	for _, pid := range pids {
		for _, p := range localPorts(pid, dst.Port) {
			ports[p] = pid
		}
	}
	now := map[string]map[int]bool{}
	for _, task := range a.h.tasks {
		var q strings.Builder
		q.WriteString("SELECT CONCAT_WS(',', IS_USED_LOCK('" + cluster.OwnerLockName(task) + "')")
		for i := 0; i < fence.Slots; i++ {
			fmt.Fprintf(&q, ", IS_USED_LOCK('%s')", fence.SlotName("apply", task, i))
		}
		q.WriteString(")")
		var ids sql.NullString
		if err := db.QueryRow(q.String()).Scan(&ids); err != nil {
			continue
		}
		if ids.String == "" {
			continue
		}
		rows, err := db.Query("SELECT ID, HOST, COMMAND, STATE FROM information_schema.PROCESSLIST WHERE ID IN (" + ids.String + ")")
		if err != nil {
			continue
		}
		seen := map[int]bool{}
		var detail []string
		for rows.Next() {
			var id int64
			var host, command string
			var state sql.NullString
			if rows.Scan(&id, &host, &command, &state) != nil {
				continue
			}
			if i := strings.LastIndexByte(host, ':'); i > 0 {
				p, _ := strconv.Atoi(host[i+1:])
				if pid, ok := ports[p]; ok {
					seen[pid] = true
					detail = append(detail, fmt.Sprintf("session %d from %s (pid %d, %s %s)", id, host, pid, command, state.String))
				}
			}
		}
		rows.Close()
		now[task] = seen
		if len(seen) > 1 {
			a.mu.Lock()
			a.bad = append(a.bad, fmt.Sprintf("%s: task %s held on the target by worker processes %v at once: %s (owner lock and slots held by sessions %s)",
				time.Now().Format("15:04:05.000"), task, seen, strings.Join(detail, "; "), ids.String))
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	a.holders = now
	a.mu.Unlock()
	a.samples.Add(1)
}

// holds reports whether pid holds any lock of any task in the last sample.
func (a *auditor) holds(pid int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.holders {
		if s[pid] {
			return true
		}
	}
	return false
}

// finish stops sampling and fails the test if two workers ever held one task.
func (a *auditor) finish(t *testing.T) {
	t.Helper()
	close(a.stop)
	<-a.done
	if a.samples.Load() < 10 {
		t.Fatalf("the auditor took only %d samples", a.samples.Load())
	}
	for _, b := range a.bad {
		t.Error(b)
	}
	t.Logf("auditor: %d samples of the target's locks, no task held by two workers: %v", a.samples.Load(), len(a.bad) == 0)
}

// localPorts lists the local TCP ports of pid's connections to remote
// port rport (/proc/net/tcp). The remote port matters: Linux gives one
// local port to several connections when their destinations differ, so a
// worker's connection to the source may share a port number with another
// worker's session on the target.
func localPorts(pid, rport int) []int {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, filepath.Base(f)))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			if i := strings.LastIndexByte(fs[2], ':'); i < 0 || fs[2][i+1:] != fmt.Sprintf("%04X", rport) {
				continue
			}
			if i := strings.LastIndexByte(fs[1], ':'); i > 0 {
				p, err := strconv.ParseInt(fs[1][i+1:], 16, 32)
				if err == nil {
					ports = append(ports, int(p))
				}
			}
		}
	}
	return ports
}

var execCommand = exec.Command
