package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Table is a Markdown table. Columns are centred like the seed reports'
// (":-:"), except those whose header starts with "<" (left aligned; the "<"
// is not printed).
type Table struct {
	Title   string // printed as "### Title" above the table when set
	Columns []string
	Rows    [][]string
}

// AddRow appends a row; missing cells are left empty.
func (t *Table) AddRow(cells ...string) { t.Rows = append(t.Rows, cells) }

// Markdown writes the table (and its title) followed by a blank line.
func (t *Table) Markdown(w io.Writer) error {
	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
	}
	heads := make([]string, len(t.Columns))
	aligns := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		if h, ok := strings.CutPrefix(c, "<"); ok {
			heads[i], aligns[i] = h, ":--"
		} else {
			heads[i], aligns[i] = c, ":-:"
		}
	}
	b.WriteString("| " + strings.Join(escapeCells(heads), " | ") + " |\n")
	b.WriteString("| " + strings.Join(aligns, " | ") + " |\n")
	for _, r := range t.Rows {
		cells := make([]string, len(t.Columns))
		copy(cells, r)
		b.WriteString("| " + strings.Join(escapeCells(cells), " | ") + " |\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func escapeCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(c, "|", `\|`), "\n", " ")
	}
	return out
}

// Num formats a figure the way the seed tables do: two decimals, trailing
// zeros dropped (111481.09, 1.16, 25107.1, 64). NaN and Inf print as "-".
func Num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatFloat(math.Round(v*100)/100, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// Change formats the relative change from a to b as "+12.3%" / "-4.0%", or
// "-" when a is zero.
func Change(a, b float64) string {
	if a == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", (b-a)/a*100)
}

// RunMarkdown writes a run's report: a header naming the server, machine and
// parameters, then one table per workload with QPS, TPS, the latency
// percentiles, errors and reconnects at every thread count.
func RunMarkdown(w io.Writer, r *Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: %s\n\n", r.Tool, r.Name())
	env := Table{Columns: []string{"<Item", "<Value"}}
	if r.Server.Version != "" {
		v := r.Server.Version
		if r.Server.VersionComment != "" {
			v += " (" + r.Server.VersionComment + ")"
		}
		env.AddRow("Server", v)
	}
	m := r.Machine
	if m.CPUs > 0 {
		cpu := fmt.Sprintf("%d vCPUs", m.CPUs)
		if m.CPUModel != "" {
			cpu += ", " + m.CPUModel
		}
		env.AddRow("CPU", cpu)
	}
	if m.MemoryMB > 0 {
		env.AddRow("RAM", fmt.Sprintf("%d MB", m.MemoryMB))
	}
	if m.OS != "" {
		os := m.OS
		if m.Kernel != "" {
			os += ", kernel " + m.Kernel
		}
		env.AddRow("OS", os)
	}
	if params := formatParams(r.Params); params != "" {
		env.AddRow("Parameters", params)
	}
	if !r.Started.IsZero() {
		env.AddRow("Started", r.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if len(env.Rows) > 0 {
		if err := env.Markdown(&b); err != nil {
			return err
		}
	}
	for _, wl := range r.Workloads() {
		t := Table{Title: "`" + wl + "`", Columns: []string{"Threads", "QPS", "TPS", "p50 (ms)", "p95 (ms)", "p99 (ms)", "max (ms)", "Errors", "Reconnects"}}
		for _, res := range r.ByWorkload(wl) {
			t.AddRow(strconv.Itoa(res.Threads), Num(res.QPS), Num(res.TPS), Num(res.P50Ms), Num(res.P95Ms), Num(res.P99Ms), Num(res.MaxMs),
				strconv.FormatInt(res.Errors, 10), strconv.FormatInt(res.Reconnects, 10))
		}
		if err := t.Markdown(&b); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatParams renders parameters as "k=v, k=v" sorted by key.
func formatParams(p map[string]any) string {
	if len(p) == 0 {
		return ""
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sortStrings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, p[k])
	}
	return strings.Join(parts, ", ")
}
