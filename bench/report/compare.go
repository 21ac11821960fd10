package report

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Better says which direction of a metric is an improvement.
type Better int

const (
	HigherIsBetter Better = iota
	LowerIsBetter
)

// Metric names one figure of a Result for tables and charts.
type Metric struct {
	Key    string // Result.Value key: "qps", "p95_ms", or a Metrics key
	Header string // table header, e.g. "95% Latency (ms)"
	Axis   string // chart axis and title, e.g. "p95 latency (ms)"; Header when empty
	Better Better
}

// The seed report's two figures.
var (
	MetricQPS = Metric{Key: "qps", Header: "QPS", Axis: "QPS", Better: HigherIsBetter}
	MetricP95 = Metric{Key: "p95_ms", Header: "95% Latency (ms)", Axis: "p95 latency (ms)", Better: LowerIsBetter}
	MetricTPS = Metric{Key: "tps", Header: "TPS", Axis: "TPS", Better: HigherIsBetter}
	// DefaultMetrics is what `sluice bench compare` prints: QPS and p95.
	DefaultMetrics = []Metric{MetricQPS, MetricP95}
)

func (m Metric) axis() string {
	if m.Axis != "" {
		return m.Axis
	}
	return m.Header
}

// Comparison puts two runs side by side, per workload and thread count.
type Comparison struct {
	NameA, NameB string
	A, B         *Run
	Metrics      []Metric
	Workloads    []WorkloadComparison
}

// WorkloadComparison holds one workload's results; A[i] and B[i] belong to
// Threads[i] and are nil where that run lacks the thread count.
type WorkloadComparison struct {
	Workload string
	Threads  []int
	A, B     []*Result
}

// Compare pairs the results of a and b by workload and threads. Workloads
// appear in a's order, then those only b has. Names are the runs' Name();
// when both are equal they get " (A)" and " (B)" appended.
func Compare(a, b *Run, metrics []Metric) *Comparison {
	if len(metrics) == 0 {
		metrics = DefaultMetrics
	}
	c := &Comparison{NameA: a.Name(), NameB: b.Name(), A: a, B: b, Metrics: metrics}
	if c.NameA == c.NameB {
		c.NameA += " (A)"
		c.NameB += " (B)"
	}
	workloads := a.Workloads()
	seen := map[string]bool{}
	for _, w := range workloads {
		seen[w] = true
	}
	for _, w := range b.Workloads() {
		if !seen[w] {
			workloads = append(workloads, w)
		}
	}
	for _, w := range workloads {
		wc := WorkloadComparison{Workload: w}
		ts := map[int]bool{}
		for _, r := range a.ByWorkload(w) {
			ts[r.Threads] = true
		}
		for _, r := range b.ByWorkload(w) {
			ts[r.Threads] = true
		}
		for t := range ts {
			wc.Threads = append(wc.Threads, t)
		}
		sort.Ints(wc.Threads)
		for _, t := range wc.Threads {
			wc.A = append(wc.A, a.Find(w, t))
			wc.B = append(wc.B, b.Find(w, t))
		}
		c.Workloads = append(c.Workloads, wc)
	}
	return c
}

func value(r *Result, key string) float64 {
	if r == nil {
		return math.NaN()
	}
	v, ok := r.Value(key)
	if !ok {
		return math.NaN()
	}
	return v
}

// Title is a workload's display name: "point_select" becomes "Point Select".
func Title(workload string) string {
	words := strings.FieldsFunc(workload, func(r rune) bool { return r == '_' || r == '-' || r == ' ' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// Markdown writes, per workload, the seed's table (one row per run and
// thread count: Version, Threads, then each metric) and a second table with
// the change of B against A at each thread count, and one summary line.
func (c *Comparison) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s vs. %s\n\n", c.NameB, c.NameA)
	env := Table{Columns: []string{"<Run", "<Server", "<Machine", "<Parameters"}}
	for _, x := range []struct {
		name string
		r    *Run
	}{{c.NameA, c.A}, {c.NameB, c.B}} {
		srv := x.r.Server.Version
		if x.r.Server.VersionComment != "" {
			srv += " (" + x.r.Server.VersionComment + ")"
		}
		mach := ""
		if x.r.Machine.CPUs > 0 {
			mach = fmt.Sprintf("%d vCPUs, %d MB", x.r.Machine.CPUs, x.r.Machine.MemoryMB)
		}
		env.AddRow(x.name, srv, mach, formatParams(x.r.Params))
	}
	if err := env.Markdown(&b); err != nil {
		return err
	}
	for _, wc := range c.Workloads {
		fmt.Fprintf(&b, "### `%s` test\n\n", Title(wc.Workload))
		cols := []string{"Version", "Threads"}
		for _, m := range c.Metrics {
			cols = append(cols, m.Header)
		}
		t := Table{Columns: cols}
		for _, side := range []struct {
			name string
			rs   []*Result
		}{{c.NameA, wc.A}, {c.NameB, wc.B}} {
			for i, r := range side.rs {
				if r == nil {
					continue
				}
				row := []string{side.name, strconv.Itoa(wc.Threads[i])}
				for _, m := range c.Metrics {
					row = append(row, Num(value(r, m.Key)))
				}
				t.AddRow(row...)
			}
		}
		if err := t.Markdown(&b); err != nil {
			return err
		}
		cols = []string{"Threads"}
		for _, m := range c.Metrics {
			cols = append(cols, m.Header+" change")
		}
		ct := Table{Columns: cols}
		for i, th := range wc.Threads {
			row := []string{strconv.Itoa(th)}
			for _, m := range c.Metrics {
				row = append(row, Change(value(wc.A[i], m.Key), value(wc.B[i], m.Key)))
			}
			ct.AddRow(row...)
		}
		if err := ct.Markdown(&b); err != nil {
			return err
		}
		var parts []string
		for _, m := range c.Metrics {
			if g, ok := wc.MeanChange(m.Key); ok {
				parts = append(parts, fmt.Sprintf("%s %+.1f%%", m.axis(), g))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "%s against %s, mean over thread counts: %s.\n\n", c.NameB, c.NameA, strings.Join(parts, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MeanChange is the mean relative change (in %) of B against A for key over
// the thread counts both runs have.
func (wc *WorkloadComparison) MeanChange(key string) (float64, bool) {
	sum, n := 0.0, 0
	for i := range wc.Threads {
		a, b := value(wc.A[i], key), value(wc.B[i], key)
		if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
			continue
		}
		sum += (b - a) / a * 100
		n++
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// Figure returns a workload's chart: one line chart per metric against
// threads, A and B as two series, panels side by side.
func (c *Comparison) Figure(wc WorkloadComparison) *Figure {
	f := &Figure{Title: Title(wc.Workload) + ": " + c.NameB + " vs. " + c.NameA}
	cats := make([]string, len(wc.Threads))
	for i, t := range wc.Threads {
		cats[i] = strconv.Itoa(t)
	}
	for _, m := range c.Metrics {
		ch := Chart{Title: m.axis(), XLabel: "threads", YLabel: m.axis(), Kind: Line, Categories: cats}
		for _, side := range []struct {
			name string
			rs   []*Result
		}{{c.NameA, wc.A}, {c.NameB, wc.B}} {
			s := Series{Name: side.name}
			for _, r := range side.rs {
				s.Values = append(s.Values, value(r, m.Key))
			}
			ch.Series = append(ch.Series, s)
		}
		f.Charts = append(f.Charts, ch)
	}
	return f
}

// WriteCharts writes one SVG per workload into dir (created if missing),
// named after the workload (point_select.svg), and returns the paths.
func (c *Comparison) WriteCharts(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chart directory: %w", err)
	}
	var paths []string
	for _, wc := range c.Workloads {
		p := filepath.Join(dir, FileName(wc.Workload)+".svg")
		if err := WriteSVG(p, c.Figure(wc)); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// FileName turns a workload name into a safe file name stem.
func FileName(s string) string {
	s = unsafeName.ReplaceAllString(s, "_")
	if s == "" {
		return "chart"
	}
	return s
}

func sortStrings(s []string) { sort.Strings(s) }
