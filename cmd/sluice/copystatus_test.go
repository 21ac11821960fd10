package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestStatusDuringCopy: while migrate copies, sluice status shows the
// copy's rows, chunks and per-table progress (and passes as a health
// check), and the metrics endpoint serves the copy's counters; once the
// copy is done, status says so and exits 3 (issue 16: status and metrics
// only existed for replication).
func TestStatusDuringCopy(t *testing.T) {
	inst := sandboxtest.Start(t, "cstat")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE ssrc", "CREATE TABLE ssrc.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO ssrc.t SELECT seq, seq FROM ssrc.seq_1_to_1000", "CREATE TABLE ssrc.u (id INT PRIMARY KEY)", "INSERT INTO ssrc.u VALUES (1)")
	ep := inst.Endpoint()
	dir := t.TempDir()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "ssrc", "vdst", "sdst", "name: vt", "name: cst").Replace(
		verifyTaskYAML(ep, ep, "ssrc.*", "dir: "+dir+"\nincremental: {metrics-addr: \"127.0.0.1:0\"}\n")))
	var during string
	var metrics string
	afterPrepare = func() {
		defer func() { afterPrepare = nil }()
		for {
			s, err := replicate.ReadStatus(dir)
			if err == nil && s.Stage == replicate.StageCopying && s.Copy != nil && s.Copy.ChunksTotal > 0 && s.MetricsAddr != "" {
				resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
				if err != nil {
					t.Errorf("metrics during the copy: %v", err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				metrics = string(b)
				break
			}
		}
		out, _, err := runCLI(t, "status", "--config", cfg)
		if err != nil {
			t.Errorf("status during the copy: %v\n%s", err, out)
		}
		during = out
	}
	defer func() { afterPrepare = nil }()
	if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full"); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`sdst\.t: 0 of (\d+) chunks`).FindStringSubmatch(during)
	if m == nil || m[1] == "0" || m[1] == "1" || !strings.Contains(during, "copying") || !strings.Contains(during, "sdst.u: 0 of 1 chunks") {
		t.Fatalf("status during the copy does not show it:\n%s", during)
	}
	total := 1 + atoi(m[1])
	for _, want := range []string{fmt.Sprintf(`sluice_copy_chunks_planned{task="cst"} %d`, total), "# TYPE sluice_copy_rows_total counter", "sluice_build_info{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics during the copy lack %q", want)
		}
	}
	out, _, err := runCLI(t, "status", "--config", cfg)
	if !errors.Is(err, sluice.ErrNotRunning) || !strings.Contains(err.Error(), fmt.Sprintf("copy ended (%d of %d chunks", total, total)) ||
		!strings.Contains(out, fmt.Sprintf("sdst.t: %s of %s chunks", m[1], m[1])) || !strings.Contains(out, "1000 rows") && !strings.Contains(out, "1001 rows") {
		t.Fatalf("status after the copy: %v\n%s", err, out)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
