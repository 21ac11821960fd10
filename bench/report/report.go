// Package report is the results format every sluice benchmark shares: one
// JSON schema for a run (machine, server, parameters, one Result per
// workload and thread count, each with a per-interval series), Markdown
// tables, an A-versus-B comparison in the layout of the seed reports
// ("| Version | Threads | QPS | 95% Latency (ms) |" plus the % change), and
// hand-written SVG line and bar charts.
//
// A benchmark fills a Run and calls Save; a person reads RunMarkdown; two
// runs are put side by side with Compare, whose Markdown and Charts methods
// render the seed's table and figures. Latency is recorded into a Latency
// (an HdrHistogram) and summarised with Summary.
//
// The API in one screen:
//
//	run := report.NewRun("sluice bench oltp", label)   // Machine filled in
//	run.Server = report.Server{Version: "10.11.6-MariaDB", Addr: "127.0.0.1:3306"}
//	run.Params = map[string]any{"tables": 4}
//	lat := report.NewLatency()                          // per worker, Merge to combine
//	lat.Record(d)
//	s := lat.Summary()                                   // P50/P95/P99/Max in ms
//	run.Add(report.Result{Workload: "point_select", Threads: 8, QPS: q, TPS: t,
//	        LatencySummary: s, Series: intervals, Metrics: map[string]float64{"rows_per_s": r}})
//	run.Save("a.json"); report.RunMarkdown(w, run)
//	a, _ := report.Load("a.json"); b, _ := report.Load("b.json")
//	cmp := report.Compare(a, b, report.DefaultMetrics) // QPS and p95
//	cmp.Markdown(w); cmp.WriteCharts(dir)              // one SVG per workload
//
// Other metrics (rows/s, lag, MB/s) go into Result.Metrics and are named by a
// Metric with that Key; Compare, tables and charts treat them like QPS.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/procstat"
)

// SchemaVersion is written into every results file. It grows when fields are
// added; fields are never removed or renamed.
const SchemaVersion = 1

// Run is one benchmark run: a tool against one server (or pipeline) with one
// set of parameters, measured at one or more workloads and thread counts.
type Run struct {
	Schema int    `json:"schema"`
	Tool   string `json:"tool"` // e.g. "sluice bench oltp"
	// Label names the run in comparisons (the seed's "Version" column), e.g.
	// "MariaDB 10.11" or "v2.1". Empty: Server.Version is used.
	Label    string         `json:"label,omitempty"`
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Machine  Machine        `json:"machine"`
	Server   Server         `json:"server"`
	Params   map[string]any `json:"params,omitempty"`
	Results  []Result       `json:"results"`
	Notes    []string       `json:"notes,omitempty"`
}

// Machine describes where the benchmark client ran.
type Machine struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Kernel   string `json:"kernel,omitempty"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	MemoryMB int64  `json:"memory_mb,omitempty"`
	Go       string `json:"go"`
}

// Server describes the measured server.
type Server struct {
	Version        string `json:"version"`                   // SELECT VERSION()
	VersionComment string `json:"version_comment,omitempty"` // @@version_comment
	Addr           string `json:"addr,omitempty"`            // host:port, never a password
}

// Result is one measurement: one workload at one thread count.
type Result struct {
	Workload   string  `json:"workload"`
	Threads    int     `json:"threads"`
	DurationS  float64 `json:"duration_s"`
	Events     int64   `json:"events"`  // transactions (sysbench "events")
	Queries    int64   `json:"queries"` // every statement, BEGIN/COMMIT included
	Reads      int64   `json:"reads"`
	Writes     int64   `json:"writes"`
	Other      int64   `json:"other"`
	QPS        float64 `json:"qps"`
	TPS        float64 `json:"tps"`
	Errors     int64   `json:"errors"`     // failed and rolled-back events
	Reconnects int64   `json:"reconnects"` // connections re-opened after a loss
	LatencySummary
	// Metrics carries any further figure (rows_per_s, lag_ms, mb_per_s...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Params holds the parameters that vary between results of one run
	// (pool size, batch), when the run-level Params do not say it all.
	Params map[string]any `json:"params,omitempty"`
	Series []Interval     `json:"series,omitempty"`
}

// LatencySummary is a latency distribution in milliseconds.
type LatencySummary struct {
	Count int64   `json:"latency_count"`
	MinMs float64 `json:"min_ms"`
	AvgMs float64 `json:"avg_ms"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// Interval is one point of a result's time series: the rates over the
// interval that ended T seconds after measurement started.
type Interval struct {
	T          float64 `json:"t"`
	QPS        float64 `json:"qps"`
	TPS        float64 `json:"tps"`
	P95Ms      float64 `json:"p95_ms"`
	Errors     int64   `json:"errors"`
	Reconnects int64   `json:"reconnects"`
	// Metrics are further per-interval figures, keyed like Result.Metrics.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// NewRun returns a Run for tool with the machine described and Started set.
func NewRun(tool, label string) *Run {
	return &Run{Schema: SchemaVersion, Tool: tool, Label: label, Started: time.Now().UTC(), Machine: CollectMachine(), Params: map[string]any{}}
}

// Add appends a result.
func (r *Run) Add(res Result) { r.Results = append(r.Results, res) }

// Name is the run's label for tables: Label, else the server version, else
// the tool.
func (r *Run) Name() string {
	switch {
	case r.Label != "":
		return r.Label
	case r.Server.Version != "":
		return r.Server.Version
	}
	return r.Tool
}

// Workloads lists the workloads in first-seen order.
func (r *Run) Workloads() []string {
	var out []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if !seen[res.Workload] {
			seen[res.Workload] = true
			out = append(out, res.Workload)
		}
	}
	return out
}

// Find returns the result for workload at threads, or nil.
func (r *Run) Find(workload string, threads int) *Result {
	for i := range r.Results {
		if r.Results[i].Workload == workload && r.Results[i].Threads == threads {
			return &r.Results[i]
		}
	}
	return nil
}

// ByWorkload returns workload's results sorted by threads.
func (r *Run) ByWorkload(workload string) []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Workload == workload {
			out = append(out, res)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Threads < out[j].Threads })
	return out
}

// Value returns the figure named key: a JSON field name of Result ("qps",
// "tps", "p95_ms", "errors"...) or a key of Metrics. ok is false when the
// result has no such figure.
func (res *Result) Value(key string) (v float64, ok bool) {
	switch key {
	case "threads":
		return float64(res.Threads), true
	case "duration_s":
		return res.DurationS, true
	case "events":
		return float64(res.Events), true
	case "queries":
		return float64(res.Queries), true
	case "reads":
		return float64(res.Reads), true
	case "writes":
		return float64(res.Writes), true
	case "other":
		return float64(res.Other), true
	case "qps":
		return res.QPS, true
	case "tps":
		return res.TPS, true
	case "errors":
		return float64(res.Errors), true
	case "reconnects":
		return float64(res.Reconnects), true
	case "latency_count":
		return float64(res.Count), true
	case "min_ms":
		return res.MinMs, true
	case "avg_ms":
		return res.AvgMs, true
	case "p50_ms":
		return res.P50Ms, true
	case "p95_ms":
		return res.P95Ms, true
	case "p99_ms":
		return res.P99Ms, true
	case "max_ms":
		return res.MaxMs, true
	}
	v, ok = res.Metrics[key]
	return v, ok
}

// Save writes the run as indented JSON to path ("-" is stdout).
func (r *Run) Save(path string) error {
	if r.Schema == 0 {
		r.Schema = SchemaVersion
	}
	if r.Results == nil {
		r.Results = []Result{} // "results": [] rather than null
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write results %s: %w", path, err)
	}
	return nil
}

// Load reads a results file written by Save.
func Load(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results %s is not a sluice results file: %v", path, err)
	}
	if r.Schema == 0 || r.Results == nil {
		return nil, fmt.Errorf("results %s is not a sluice results file: no schema or results", path)
	}
	if r.Schema > SchemaVersion {
		return nil, fmt.Errorf("results %s has schema %d; this sluice reads up to %d: upgrade sluice", path, r.Schema, SchemaVersion)
	}
	return &r, nil
}

// CollectMachine describes this machine from the Go runtime and /proc.
func CollectMachine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	m.CPUModel, m.MemoryMB = procstat.Machine()
	return m
}
