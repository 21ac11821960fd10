package apply_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestLargeTransactionBoundedMemory writes one source transaction of about
// 1 GB of row data (SLUICE_LARGE_TXN_MB overrides the size) and replicates it
// with a separate process: binlog reader, decoder and applier, as sluice
// runs them, minus the relay log. The child resets its peak RSS
// (/proc/self/clear_refs = 5) just before replicating and reports VmHWM from
// /proc/self/status at the end, so the figure is the peak resident memory
// of the whole replication run. It must stay under 300 MB, and the target
// must show the transaction all at once: a reader sampling the target
// while it applies sees either none of its rows or all of them.
func TestLargeTransactionBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and replicates 1 GB")
	}
	mb := 1024
	if s := os.Getenv("SLUICE_LARGE_TXN_MB"); s != "" {
		mb, _ = strconv.Atoi(s)
	}
	bin := os.Args[0]
	if raceEnabled {
		// The race detector's shadow memory would dominate the figure:
		// measure the same code built without it.
		bin = filepath.Join(t.TempDir(), "apply.test")
		build := exec.Command("go", "test", "-c", "-o", bin, "github.com/sluice-db/sluice/apply")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the replication child without -race: %v: %s", err, out)
		}
	}
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "large", src)
	rows := mb * 1024 // rows of about 1 KB
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE big",
		"CREATE TABLE big.t (id BIGINT PRIMARY KEY, k INT NOT NULL, pad VARCHAR(1000) NOT NULL, UNIQUE KEY (k))",
		"CREATE TABLE big.small (id INT PRIMARY KEY)",
		"INSERT INTO big.small VALUES (1)",
		// One transaction: about 1 KB per row, every row distinct.
		fmt.Sprintf("INSERT INTO big.t SELECT seq, seq, CONCAT(seq, REPEAT(CHAR(65 + seq %% 26), 990)) FROM big.seq_1_to_%d", rows),
		"INSERT INTO big.small VALUES (2)",
	)
	until := sourcePos(t, src)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seen []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			var n int
			if err := dst.QueryRow("SELECT COUNT(*) FROM big.t").Scan(&n); err == nil {
				seen = append(seen, n)
			}
		}
	}()
	start := time.Now()
	cmd := childCmdBin(bin, srcInst, "large", until, "SLUICE_WORKERS=4", "SLUICE_CLEAR_REFS=1")
	out, err := cmd.CombinedOutput()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("replication process: %v: %s", err, out)
	}
	elapsed := time.Since(start)
	var hwm int
	if i := strings.Index(string(out), "VmHWM: "); i >= 0 {
		fmt.Sscanf(string(out[i:]), "VmHWM: %d kB", &hwm)
	}
	t.Logf("%d MB transaction (%d rows) replicated in %s; peak RSS of the replication process %d MB; %s",
		mb, rows, elapsed.Round(time.Second), hwm/1024, strings.TrimSpace(string(out)))
	if hwm == 0 {
		t.Fatalf("no VmHWM reported: %s", out)
	}
	if hwm > 300*1024 {
		t.Fatalf("peak RSS %d MB, want under 300 MB", hwm/1024)
	}
	for _, n := range seen {
		if n != 0 && n != rows {
			t.Fatalf("a reader saw %d of %d rows: the transaction was not applied atomically", n, rows)
		}
	}
	var sc, dc, ss, ds int64
	if err := src.QueryRow("SELECT COUNT(*), SUM(CRC32(pad)) FROM big.t").Scan(&sc, &ss); err != nil {
		t.Fatal(err)
	}
	if err := dst.QueryRow("SELECT COUNT(*), SUM(CRC32(pad)) FROM big.t").Scan(&dc, &ds); err != nil {
		t.Fatal(err)
	}
	if sc != dc || ss != ds || dc != int64(rows) {
		t.Fatalf("target %d rows (crc sum %d), source %d rows (crc sum %d)", dc, ds, sc, ss)
	}
	sameTables(t, src, dst, "big.small")
	sandboxtest.MustExec(t, src, "DROP DATABASE big")
	sandboxtest.MustExec(t, dst, "DROP DATABASE big")
}
