package merge_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
)

// TestGlobalBinlogOfThreeShards: `sluice serve` with sources: merges three
// MariaDB shards (domains 1, 2, 3, one database each) under write load
// into one binlog, which a stock MariaDB replica applies with
// MASTER_USE_GTID=slave_pos. Along the way sluice is killed with SIGKILL
// (once the merged binlog is seen to hold transactions of the load) and
// restarted; then shard2 is stopped: the merge waits for it (the status
// file and the log say so) and holds back a transaction committed on
// shard1 meanwhile, and goes on once shard2 is up again. At the end the
// replica equals the union of the shards (CHECKSUM TABLE per table), its
// gtid_slave_pos is the shards' positions in their domains,
// `mariadb-binlog --verify-binlog-checksum` reads every merged file, and
// each domain's sequence numbers in the merged files run without a gap or
// a repeat from the start to the shard's last transaction.
func TestGlobalBinlogOfThreeShards(t *testing.T) {
	if _, err := exec.LookPath("mariadb-binlog"); err != nil {
		t.Fatalf("mariadb-binlog not installed (fix: make deps): %v", err)
	}
	bin := sandboxtest.BuildSluice(t)
	shards := make([]*sandbox.Instance, 3)
	dbs := make([]*sql.DB, 3)
	startGTID := make([]string, 3)
	for i := range shards {
		shards[i] = sandboxtest.Start(t, fmt.Sprintf("shard%d", i+1))
		dbs[i] = sandboxtest.MustOpen(t, shards[i], "")
		startGTID[i] = mapped(t, dbs[i], i+1)
	}
	rep := sandboxtest.Start(t, "replica")
	rdb := sandboxtest.MustOpen(t, rep, "")
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	var srcs strings.Builder
	for i, s := range shards {
		fmt.Fprintf(&srcs, "  - {name: shard%d, host: 127.0.0.1, port: %d, user: root, domain-id: %d}\n", i+1, s.Port, i+1)
	}
	taskFile := filepath.Join(dir, "global.yaml")
	yaml := fmt.Sprintf("name: global\ndir: %s\nsources:\n%sserve: {listen: %q, server-id: 4747, max-binlog-size: 65536, users: [{user: repl, password: \"${SERVE_TEST_PW}\"}]}\n",
		filepath.Join(dir, "state"), srcs.String(), addr)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "gl0bal-pw"
	start := func() (*exec.Cmd, *sandboxtest.SyncBuffer) {
		cmd := exec.Command(bin, "serve", "--config", taskFile)
		cmd.Env = append(os.Environ(), "SERVE_TEST_PW="+pw)
		out := &sandboxtest.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFor(t, out, "serving on", func() bool { return strings.Contains(out.String(), "serving on") })
		return cmd, out
	}
	cmd, out := start()
	svc, err := sql.Open("mysql", "repl:"+pw+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	merged := func() map[uint32]uint64 {
		var s string
		if err := svc.QueryRow("SELECT @@gtid_binlog_pos").Scan(&s); err != nil {
			return nil
		}
		return seqs(t, s)
	}

	sandboxtest.MustExec(t, rdb,
		"SET GLOBAL gtid_slave_pos='"+strings.Join(nonEmpty(startGTID), ",")+"'",
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+strconv.Itoa(port)+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	for i, db := range dbs {
		sandboxtest.MustExec(t, db,
			fmt.Sprintf("CREATE DATABASE sh%d", i+1),
			fmt.Sprintf("CREATE TABLE sh%d.t (id int primary key auto_increment, k int, v varchar(100))", i+1),
			fmt.Sprintf("CREATE TABLE sh%d.u (id int primary key, n int)", i+1),
			fmt.Sprintf("INSERT INTO sh%d.u SELECT seq, 0 FROM sh%d.seq_1_to_20", i+1, i+1))
	}
	// The load: one writer per shard, multi-statement transactions.
	var stop atomic.Bool
	paused := make([]atomic.Bool, 3)
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				if paused[i].Load() {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				tx, err := db.Begin()
				if err != nil {
					continue
				}
				_, err1 := tx.Exec(fmt.Sprintf("INSERT INTO sh%d.t (k, v) VALUES (?, REPEAT('x', ?))", i+1), n, n%90)
				_, err2 := tx.Exec(fmt.Sprintf("UPDATE sh%d.u SET n = n + 1 WHERE id = ?", i+1), 1+n%20)
				if err1 != nil || err2 != nil {
					tx.Rollback()
					continue
				}
				_ = tx.Commit()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	// kill -9 once the merged binlog holds 50 transactions of shard1's load.
	base := seqs(t, startGTID[0])[1]
	waitFor(t, out, "the load in the merged binlog", func() bool { return merged()[1] >= base+50 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("killed; restarting")
	_, out = start()

	// shard2 goes down: the merge waits for it.
	paused[1].Store(true)
	if err := shards[1].Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "the log naming shard2", func() bool { return strings.Contains(out.String(), "waiting for source shard2") })
	st := globalStatus(t, dir)
	if st.Merge.Waiting != "shard2" {
		t.Fatalf("status while shard2 is down: %+v", st.Merge)
	}
	metricsURL := "http://" + st.MetricsAddr + "/metrics"
	if m := scrapeMetrics(t, metricsURL); m.get("sluice_merge_source_holding_back", "shard2") != 1 || m.get("sluice_merge_source_holding_back", "shard1") != 0 ||
		m.get("sluice_merge_source_holding_back_seconds", "shard2") <= 0 {
		t.Fatalf("metrics while shard2 is down do not name it as holding the merge back:\n%s", m.text)
	}
	paused[0].Store(true)
	sandboxtest.MustExec(t, dbs[0], "INSERT INTO sh1.t (k, v) VALUES (-1, 'while shard2 is down')")
	marker := seqs(t, mapped(t, dbs[0], 1))[1]
	master := masterStatus(t, dbs[0])
	waitFor(t, out, "the marker in shard1's relay", func() bool {
		s := globalStatus(t, dir)
		return s.Sources[0].Relay.Compare(master) >= 0
	})
	if got := merged()[1]; got >= marker {
		t.Fatalf("shard1's transaction %d, committed while shard2 was down, is merged (domain 1 at %d)", marker, got)
	}
	sandboxtest.Up(t, shards[1])
	paused[1].Store(false)
	paused[0].Store(false)
	waitFor(t, out, "the merge going on after shard2's return", func() bool { return merged()[1] >= marker })
	waitFor(t, out, "the log saying the merge goes on", func() bool { return strings.Contains(out.String(), "source shard2 heard from again") })

	time.Sleep(time.Second) // more load after the return
	stop.Store(true)
	wg.Wait()
	// The metrics count, per source, exactly the transactions written:
	// with the load stopped and all of it merged, each shard commits a
	// known number more.
	waitFor(t, out, "the load merged", func() bool {
		got := merged()
		for i, db := range dbs {
			if got[uint32(i+1)] < seqs(t, mapped(t, db, i+1))[uint32(i+1)] {
				return false
			}
		}
		return true
	})
	before := scrapeMetrics(t, metricsURL)
	wantSeq := map[uint32]uint64{}
	for i, db := range dbs {
		for n := 0; n < 3+2*i; n++ {
			sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO sh%d.t (k, v) VALUES (%d, 'counted')", i+1, -100-n))
		}
		wantSeq[uint32(i+1)] = seqs(t, mapped(t, db, i+1))[uint32(i+1)]
	}
	waitFor(t, out, "the counted transactions merged", func() bool {
		got := merged()
		for d, q := range wantSeq {
			if got[d] < q {
				return false
			}
		}
		return true
	})
	after := scrapeMetrics(t, metricsURL)
	for i := range dbs {
		src := fmt.Sprintf("shard%d", i+1)
		d := func(name string) float64 { return after.get(name, src) - before.get(name, src) }
		if got := d("sluice_merge_source_transactions_total"); got != float64(3+2*i) {
			t.Errorf("%s: %v transactions counted, %d written", src, got, 3+2*i)
		}
		// Each is at least a GTID event, a table map, a rows event, an XID.
		if ev, by := d("sluice_merge_source_events_total"), d("sluice_merge_source_bytes_total"); ev < float64(4*(3+2*i)) || by < 40*ev {
			t.Errorf("%s: %v events, %v bytes counted for %d transactions", src, ev, by, 3+2*i)
		}
		if after.get("sluice_merge_source_holding_back", src) != 0 || after.get("sluice_merge_source_lag_seconds", src) > 30 {
			t.Errorf("%s idle and heard from: %s", src, after.text)
		}
	}
	if got := after.get("sluice_merge_transactions_total", "") - before.get("sluice_merge_transactions_total", ""); got != 3+5+7 {
		t.Errorf("merged stream: %v transactions counted, 15 written", got)
	}
	// The exposition passes promtool's lint, and every metric the global
	// binlog's dashboard queries is in it (the replica's too: one reads).
	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = strings.NewReader(after.text)
	if b, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics (make deps installs promtool): %v\n%s", err, b)
	}
	dash, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "sluice-global-binlog.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`sluice_[a-z_]+`).FindAllString(string(dash), -1) {
		if !strings.Contains(after.text, name) {
			t.Errorf("the global binlog's dashboard names %s, which is not exported", name)
		}
	}
	// sluice status shows the same per source, and the replica.
	status := exec.Command(bin, "status", "--config", taskFile)
	status.Env = append(os.Environ(), "SERVE_TEST_PW="+pw)
	so, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("sluice status: %v\n%s", err, so)
	}
	for i := range dbs {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^  source:\s+shard%d \(domain %d\): relay at .*, lag [0-9.]+ s; [0-9]+ txns/s, [0-9]+ events/s, [0-9.]+ MB/s; [0-9]+ transactions since start$`, i+1, i+1)).Match(so) {
			t.Errorf("sluice status does not show shard%d's part:\n%s", i+1, so)
		}
	}
	if !regexp.MustCompile(`(?m)^  replica:\s+server_id \d+ from `).Match(so) || strings.Contains(string(so), "waiting:") {
		t.Errorf("sluice status: no replica, or waiting:\n%s", so)
	}
	t.Logf("sluice status:\n%s", so)
	want := make([]string, 3)
	for i, db := range dbs {
		want[i] = mapped(t, db, i+1)
	}
	wantPos := strings.Join(want, ",")
	waitFor(t, out, "the replica at "+wantPos, func() bool {
		var got string
		if err := rdb.QueryRow("SELECT @@gtid_slave_pos").Scan(&got); err != nil {
			t.Fatal(err)
		}
		st := slaveStatus(t, rdb)
		if st["Last_IO_Error"] != "" || st["Last_SQL_Error"] != "" {
			t.Fatalf("replica stopped: IO %q, SQL %q", st["Last_IO_Error"], st["Last_SQL_Error"])
		}
		return sameSet(got, wantPos)
	})
	for i, db := range dbs {
		for _, tb := range []string{"t", "u"} {
			q := fmt.Sprintf("CHECKSUM TABLE sh%d.%s", i+1, tb)
			var a, b [2]any
			if err := db.QueryRow(q).Scan(&a[0], &a[1]); err != nil {
				t.Fatal(err)
			}
			if err := rdb.QueryRow(q).Scan(&b[0], &b[1]); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a[1]) != fmt.Sprint(b[1]) || a[1] == nil {
				t.Fatalf("%s: shard %v, replica %v", q, a[1], b[1])
			}
		}
	}
	checkFiles(t, filepath.Join(dir, "state", "global"), startGTID, want)
}

// metricsText is a scrape of the service's metrics.
type metricsText struct {
	t    *testing.T
	text string
}

func scrapeMetrics(t *testing.T, url string) metricsText {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return metricsText{t, string(b)}
}

// get is the value of the series name of source src ("" for a series
// without a source label); a missing series fails the test.
func (m metricsText) get(name, src string) float64 {
	for _, l := range strings.Split(m.text, "\n") {
		if !strings.HasPrefix(l, name+"{") || (src != "") != strings.Contains(l, `source="`) || src != "" && !strings.Contains(l, `source="`+src+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			return v
		}
	}
	m.t.Helper()
	m.t.Fatalf("no series %s of source %q in:\n%s", name, src, m.text)
	return 0
}

// checkFiles reads every merged file with mariadb-binlog
// --verify-binlog-checksum, and counts each domain's GTIDs: from the
// start to the end, each sequence number exactly once.
func checkFiles(t *testing.T, gdir string, start, end []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(gdir, "global-bin.*"))
	if err != nil || len(files) < 2 {
		t.Fatalf("merged files: %v %v", files, err)
	}
	sort.Strings(files)
	for _, f := range files {
		o, err := exec.Command("mariadb-binlog", "--verify-binlog-checksum", "--base64-output=decode-rows", "-vv", f).CombinedOutput()
		if err != nil || strings.Contains(string(o), "ERROR") {
			t.Fatalf("mariadb-binlog %s: %v\n%s", filepath.Base(f), err, tail(string(o)))
		}
	}
	next := map[uint32]uint64{}
	for i := range start {
		next[uint32(i+1)] = seqs(t, start[i])[uint32(i+1)] + 1
	}
	p := replication.NewBinlogParser()
	p.SetVerifyChecksum(true)
	count := 0
	for _, f := range files {
		err := p.ParseFile(f, 4, func(e *replication.BinlogEvent) error {
			if g, ok := e.Event.(*replication.MariadbGTIDEvent); ok {
				d := g.GTID.DomainID
				if g.GTID.SequenceNumber != next[d] {
					return fmt.Errorf("domain %d: %d where %d comes next (a transaction missing or repeated) in %s", d, g.GTID.SequenceNumber, next[d], filepath.Base(f))
				}
				next[d]++
				count++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range end {
		d := uint32(i + 1)
		if last := seqs(t, end[i])[d]; next[d] != last+1 {
			t.Fatalf("domain %d: the merged files end at %d, the shard at %d", d, next[d]-1, last)
		}
	}
	t.Logf("%d transactions in %d merged files, each once", count, len(files))
}

// mapped is a shard's gtid_binlog_pos in the shard's merged domain.
func mapped(t *testing.T, db *sql.DB, domain int) string {
	t.Helper()
	var s string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == "" {
		return ""
	}
	f := strings.SplitN(s, "-", 2)
	if strings.Contains(s, ",") || len(f) != 2 {
		t.Fatalf("shard position %q: want one domain", s)
	}
	return strconv.Itoa(domain) + "-" + f[1]
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func seqs(t *testing.T, s string) map[uint32]uint64 {
	t.Helper()
	out := map[uint32]uint64{}
	if s == "" {
		return out
	}
	set, err := mysql.ParseMariadbGTIDSet(s)
	if err != nil {
		t.Fatal(err)
	}
	for d, g := range set.(*mysql.MariadbGTIDSet).Sets {
		out[d] = g.SequenceNumber
	}
	return out
}

func sameSet(a, b string) bool {
	x, err1 := mysql.ParseMariadbGTIDSet(a)
	y, err2 := mysql.ParseMariadbGTIDSet(b)
	return err1 == nil && err2 == nil && x.Equal(y)
}

func globalStatus(t *testing.T, dir string) replicate.GlobalStatus {
	t.Helper()
	var st replicate.GlobalStatus
	b, err := os.ReadFile(filepath.Join(dir, "state", replicate.GlobalStatusFile))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || len(st.Sources) != 3 {
		return replicate.GlobalStatus{Sources: make([]replicate.GlobalSourceStat, 3)}
	}
	return st
}

func waitFor(t *testing.T, out *sandboxtest.SyncBuffer, what string, ok func() bool) {
	t.Helper()
	sandboxtest.Eventually(t, 2*time.Minute, what, ok, func() string { return "sluice: " + tail(out.String()) })
}

func tail(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > 40 {
		l = l[len(l)-40:]
	}
	return strings.Join(l, "\n")
}

func masterStatus(t *testing.T, db *sql.DB) sluice.Position { return sandboxtest.MasterStatus(t, db) }

func slaveStatus(t *testing.T, db *sql.DB) map[string]string { return sandboxtest.SlaveStatus(t, db) }
