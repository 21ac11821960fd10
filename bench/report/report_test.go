package report

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./bench/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./bench/report -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// seedRuns are the first rows of the seed report's Point Select and Update
// Index tables (TiDB v2.0 and v2.1), so the rendering can be read against it.
func seedRuns() (*Run, *Run) {
	mk := func(label string, rows map[string][][3]float64) *Run {
		r := &Run{Schema: SchemaVersion, Tool: "sluice bench oltp", Label: label,
			Started: time.Date(2018, 9, 1, 0, 0, 0, 0, time.UTC),
			Machine: Machine{OS: "CentOS 7.3.1611", CPUs: 40, CPUModel: "Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz", MemoryMB: 131072},
			Server:  Server{Version: "5.7.10-TiDB-" + label},
			Params:  map[string]any{"tables": 16, "table_size": 10000000, "time": "5m0s"}}
		for _, wl := range []string{"point_select", "update_index"} {
			for _, row := range rows[wl] {
				r.Add(Result{Workload: wl, Threads: int(row[0]), QPS: row[1], TPS: row[1], DurationS: 300,
					LatencySummary: LatencySummary{P50Ms: row[2] / 2, P95Ms: row[2], P99Ms: row[2] * 1.5, MaxMs: row[2] * 4}})
			}
		}
		return r
	}
	a := mk("v2.0", map[string][][3]float64{
		"point_select": {{64, 75285.87, 1.93}, {128, 92141.79, 3.68}, {256, 107464.93, 6.67}},
		"update_index": {{64, 9754.68, 11.65}, {128, 10603.31, 24.38}, {256, 11011.71, 50.11}},
	})
	b := mk("v2.1", map[string][][3]float64{
		"point_select": {{64, 111481.09, 1.16}, {128, 145102.62, 2.52}, {256, 161311.9, 4.57}},
		"update_index": {{64, 9934.49, 12.08}, {128, 10505.95, 25.28}, {256, 11007.7, 55.82}},
	})
	return a, b
}

func TestCompareMarkdownGolden(t *testing.T) {
	a, b := seedRuns()
	var buf bytes.Buffer
	if err := Compare(a, b, nil).Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| Version | Threads | QPS | 95% Latency (ms) |",
		"| v2.1 | 64 | 111481.09 | 1.16 |",
		"| v2.0 | 256 | 107464.93 | 6.67 |",
		"| 64 | +48.1% | -39.9% |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	golden(t, "compare.md", buf.Bytes())
}

func TestRunMarkdownGolden(t *testing.T) {
	_, b := seedRuns()
	b.Results[0].Errors, b.Results[0].Reconnects = 3, 1
	var buf bytes.Buffer
	if err := RunMarkdown(&buf, b); err != nil {
		t.Fatal(err)
	}
	golden(t, "run.md", buf.Bytes())
}

func TestCompareChartsGolden(t *testing.T) {
	a, b := seedRuns()
	c := Compare(a, b, nil)
	dir := t.TempDir()
	paths, err := c.WriteCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || filepath.Base(paths[0]) != "point_select.svg" {
		t.Fatalf("charts %v, want point_select.svg and update_index.svg", paths)
	}
	got, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("<svg ")) || !bytes.Contains(got, []byte("<polyline")) {
		t.Errorf("not a line chart:\n%s", got)
	}
	golden(t, "point_select.svg", got)
}

func TestBarChartGolden(t *testing.T) {
	c := Chart{Title: "Load throughput", XLabel: "pool size", YLabel: "MB/s", Kind: Bar,
		Categories: []string{"8", "16", "32"},
		Series:     []Series{{Name: "sluice", Values: []float64{40.5, 71.2, 88}}, {Name: "myloader", Values: []float64{35, math.NaN(), 80.25}}}}
	var buf bytes.Buffer
	if err := c.SVG(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Count(buf.String(), "<rect ") != 1+5+2 { // background, 5 bars, 2 legend keys
		t.Errorf("bar chart has %d rects:\n%s", strings.Count(buf.String(), "<rect "), buf.String())
	}
	golden(t, "bar.svg", buf.Bytes())
}

func TestSVGEscapes(t *testing.T) {
	var buf bytes.Buffer
	c := Chart{Title: `a<b & "c"`, Categories: []string{"1"}, Series: []Series{{Name: "x<y", Values: []float64{1}}}}
	if err := c.SVG(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "a<b") || !strings.Contains(buf.String(), "a&lt;b &amp; &quot;c&quot;") {
		t.Errorf("title not escaped:\n%s", buf.String())
	}
}

func TestPercentiles(t *testing.T) {
	l := NewLatency()
	// 1..1000 ms, one each: p50 = 500 ms, p95 = 950, p99 = 990, max = 1000,
	// to the histogram's three significant digits.
	for i := 1; i <= 1000; i++ {
		l.Record(time.Duration(i) * time.Millisecond)
	}
	s := l.Summary()
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*0.001+0.001 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("p50", s.P50Ms, 500)
	check("p95", s.P95Ms, 950)
	check("p99", s.P99Ms, 990)
	check("max", s.MaxMs, 1000)
	check("min", s.MinMs, 1)
	check("avg", s.AvgMs, 500.5)
	if s.Count != 1000 {
		t.Errorf("count %d", s.Count)
	}

	// Merge: a second recorder with a slow tail moves p99, not p50.
	tail := NewLatency()
	for i := 0; i < 20; i++ {
		tail.Record(5 * time.Second)
	}
	l.Merge(tail)
	s = l.Summary()
	check("merged p99", s.P99Ms, 5000)
	if s.P50Ms > 520 {
		t.Errorf("merged p50 = %v, want about 510", s.P50Ms)
	}

	// Empty and sub-microsecond.
	if (NewLatency().Summary() != LatencySummary{}) {
		t.Error("empty recorder has a summary")
	}
	z := NewLatency()
	z.Record(0)
	if z.Percentile(50) != 0.001 {
		t.Errorf("zero duration recorded as %v ms, want 0.001", z.Percentile(50))
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	a, _ := seedRuns()
	a.Results[0].Metrics = map[string]float64{"rows_per_s": 12.5}
	a.Results[0].Series = []Interval{{T: 1, QPS: 10, TPS: 10, P95Ms: 1}}
	path := filepath.Join(t.TempDir(), "a.json")
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Results) != len(a.Results) || b.Results[0].QPS != a.Results[0].QPS || b.Label != "v2.0" {
		t.Fatalf("round trip lost data: %+v", b.Results[0])
	}
	if v, ok := b.Results[0].Value("rows_per_s"); !ok || v != 12.5 {
		t.Errorf("metric rows_per_s = %v %v", v, ok)
	}
	if v, _ := b.Results[0].Value("p95_ms"); v != 1.93 {
		t.Errorf("p95_ms = %v", v)
	}
	raw, _ := os.ReadFile(path)
	for _, key := range []string{`"workload"`, `"threads"`, `"qps"`, `"tps"`, `"p50_ms"`, `"p95_ms"`, `"p99_ms"`, `"max_ms"`, `"series"`, `"machine"`, `"server"`} {
		if !bytes.Contains(raw, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"x":1}`), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "not a sluice results file") {
		t.Errorf("Load(bad) = %v", err)
	}
}

func TestNumAndChange(t *testing.T) {
	for v, want := range map[float64]string{111481.09: "111481.09", 25107.1: "25107.1", 64: "64", 1.164: "1.16", 0: "0", math.NaN(): "-"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
	if got := Change(100, 150); got != "+50.0%" {
		t.Errorf("Change = %q", got)
	}
	if got := Change(0, 1); got != "-" {
		t.Errorf("Change from zero = %q", got)
	}
	if got := niceTicks(9.3, 5); got[len(got)-1] != 10 {
		t.Errorf("niceTicks(9.3) = %v", got)
	}
}
