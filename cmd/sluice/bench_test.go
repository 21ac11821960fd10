package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/bench/report"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// runCLI runs sluice with args and returns stdout, stderr and the error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestBenchBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable", []string{"bench", "oltp", "run", "--port", closed, "--time", "1s"}, "server unreachable"},
		{"unreachable prepare", []string{"bench", "oltp", "prepare", "--port", closed}, "server unreachable"},
		{"bad threads", []string{"bench", "oltp", "run", "--threads", "8,x"}, "--threads"},
		{"zero threads", []string{"bench", "oltp", "run", "--threads", "0", "--port", closed}, "invalid --threads 0"},
		{"unknown workload", []string{"bench", "oltp", "run", "--workload", "tpcc", "--port", closed}, "unknown workload"},
		{"bad time", []string{"bench", "oltp", "run", "--time", "soon"}, "--time"},
		{"unknown flag", []string{"bench", "oltp", "run", "--mysql-host", "x"}, "unknown flag"},
		{"bad rand", []string{"bench", "oltp", "run", "--rand-type", "zipf", "--port", closed}, "invalid --rand-type"},
		{"bad ignore", []string{"bench", "oltp", "run", "--ignore-errors", "deadlock", "--port", closed}, "--ignore-errors"},
		{"compare missing file", []string{"bench", "compare", "nope-a.json", "nope-b.json"}, "check the path"},
		{"compare one arg", []string{"bench", "compare", "a.json"}, "accepts 2 arg"},
	}
	for _, c := range cases {
		_, _, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
			continue
		}
		if exitCode(err) == 0 {
			t.Errorf("%s: exit code 0", c.name)
		}
	}
}

func TestBenchCompareFromFiles(t *testing.T) {
	dir := t.TempDir()
	mk := func(label string, qps ...float64) string {
		r := &report.Run{Schema: report.SchemaVersion, Tool: "sluice bench oltp", Label: label, Server: report.Server{Version: "10.11.6-MariaDB"}}
		for i, q := range qps {
			r.Add(report.Result{Workload: "point_select", Threads: 8 << i, QPS: q, TPS: q, LatencySummary: report.LatencySummary{P95Ms: 100 / q}})
		}
		p := filepath.Join(dir, label+".json")
		if err := r.Save(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk("old", 1000, 1800), mk("new", 1500, 2700)
	out, _, err := runCLI(t, "bench", "compare", a, b, "--out", filepath.Join(dir, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Version | Threads | QPS | 95% Latency (ms) |", "| new | 16 | 2700 |", "| 8 | +50.0% |"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
	svg := filepath.Join(dir, "charts", "point_select.svg")
	checkSVG(t, svg)
}

func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
	}
	if !bytes.Contains(b, []byte("<polyline")) || !bytes.Contains(b, []byte(">QPS<")) {
		t.Errorf("%s has no QPS line", path)
	}
}

// TestBenchOLTPSweep runs the contract end to end against a sandbox:
// prepare, two short sweeps written as JSON, compare with charts, cleanup.
func TestBenchOLTPSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a MariaDB sandbox")
	}
	inst := sandboxtest.Start(t, "cmdbench")
	port := fmt.Sprint(inst.Port)
	dir := t.TempDir()
	conn := []string{"--host", "127.0.0.1", "--port", port, "--user", "root", "--password", "", "--db", "sbcli"}
	common := append([]string{"--tables", "2", "--table-size", "300"}, conn...)

	if _, _, err := runCLI(t, append([]string{"bench", "oltp", "prepare", "--threads", "2"}, common...)...); err != nil {
		t.Fatal(err)
	}
	// run before the tables exist in another database: a clear error.
	_, _, err := runCLI(t, "bench", "oltp", "run", "--time", "1s", "--tables", "2", "--port", port, "--db", "sbnone")
	if !errors.Is(err, sluice.ErrUnknownTable) || !strings.Contains(err.Error(), "prepare") {
		t.Errorf("run on a database without tables: %v", err)
	}

	for _, label := range []string{"A", "B"} {
		out, stderr, err := runCLI(t, append([]string{"bench", "oltp", "run", "--workload", "point_select,write_only", "--threads", "1,2",
			"--time", "1s", "--report-interval", "1", "--label", label, "--json", filepath.Join(dir, label+".json")}, common...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "### `write_only`") || !strings.Contains(stderr, "] point_select thds: 2 tps:") {
			t.Errorf("run %s output:\n%s\n%s", label, out, stderr)
		}
	}
	run, err := report.Load(filepath.Join(dir, "A.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != 4 || run.Label != "A" || run.Machine.CPUs == 0 || !strings.Contains(run.Server.Version, "MariaDB") {
		t.Fatalf("results file: %d results, label %q, machine %+v, server %+v", len(run.Results), run.Label, run.Machine, run.Server)
	}
	for _, r := range run.Results {
		if r.QPS <= 0 || r.TPS <= 0 || r.P95Ms <= 0 || r.P50Ms > r.P95Ms || r.P95Ms > r.P99Ms || len(r.Series) == 0 {
			t.Errorf("implausible result %+v", r)
		}
		if r.Workload == "write_only" && r.Errors == 0 && r.QPS/r.TPS < 5.9 {
			t.Errorf("write_only QPS/TPS = %v, want 6 statements per transaction", r.QPS/r.TPS)
		}
	}
	out, _, err := runCLI(t, "bench", "compare", filepath.Join(dir, "A.json"), filepath.Join(dir, "B.json"), "--out", filepath.Join(dir, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| A | 2 |") || !strings.Contains(out, "| B | 1 |") || !strings.Contains(out, "### `Write Only` test") {
		t.Errorf("compare output:\n%s", out)
	}
	checkSVG(t, filepath.Join(dir, "charts", "point_select.svg"))
	checkSVG(t, filepath.Join(dir, "charts", "write_only.svg"))

	if _, _, err := runCLI(t, append([]string{"bench", "oltp", "cleanup"}, common...)...); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, append([]string{"bench", "oltp", "run", "--time", "1s"}, common...)...)
	if !errors.Is(err, sluice.ErrUnknownTable) {
		t.Errorf("run after cleanup: %v", err)
	}
}
