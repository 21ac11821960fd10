// Command summary draws docs/benchmarks.md's current table and one SVG chart
// per seed benchmark from bench/results/current.json, the one place the
// current figures live. The figures in that file are copied from the detail
// files under docs/benchmarks/, each with its date, commit and command, so a
// rerun of a benchmark updates one entry and this command redraws the page.
//
//	go run ./bench/summary            # rewrites docs/benchmarks.md's table and docs/benchmarks/*.svg
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluice-db/sluice/bench/report"
	"github.com/sluice-db/sluice/internal/atomicfile"
)

// Results is bench/results/current.json.
type Results struct {
	Machine string `json:"machine"`
	Seeds   []Seed `json:"seeds"`
}

// Seed is one benchmark's current result.
type Seed struct {
	Seed      string `json:"seed"`
	File      string `json:"file"` // chart name under docs/benchmarks/
	What      string `json:"what"`
	Command   string `json:"command"`
	Date      string `json:"date"`
	Commit    string `json:"commit"`
	Unit      string `json:"unit"`
	Peer      string `json:"peer"`
	RatioOnly bool   `json:"ratio_only"` // rows hold sluice/peer already (peer = 1)
	Rows      []Row  `json:"rows"`
	Goal      string `json:"goal"`
	Met       string `json:"met"`
	Detail    string `json:"detail"`
}

// Row is one measured pair; Extra holds further contenders of the same run
// (a floor, no coordinator), drawn as more bars.
type Row struct {
	Label  string             `json:"label"`
	Sluice float64            `json:"sluice"`
	Peer   float64            `json:"peer"`
	Extra  map[string]float64 `json:"extra"`
}

const (
	begin = "<!-- summary:begin (go run ./bench/summary) -->"
	end   = "<!-- summary:end -->"
)

func main() {
	in := flag.String("in", "bench/results/current.json", "current results")
	page := flag.String("page", "docs/benchmarks.md", "page whose table is rewritten between the summary markers")
	dir := flag.String("svg", "docs/benchmarks", "directory for the charts")
	flag.Parse()
	if err := run(*in, *page, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
}

func run(in, page, dir string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r Results
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := r.check(); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	for _, s := range r.Seeds {
		if err := report.WriteSVG(filepath.Join(dir, "summary-"+s.File+".svg"), s.Figure()); err != nil {
			return err
		}
	}
	old, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	var table strings.Builder
	if err := r.Markdown(&table); err != nil {
		return err
	}
	text, err := splice(string(old), table.String())
	if err != nil {
		return fmt.Errorf("%s: %w", page, err)
	}
	return atomicfile.WriteFile(page, []byte(text), 0o644)
}

func (r *Results) check() error {
	seen := map[string]bool{}
	for _, s := range r.Seeds {
		switch {
		case s.File == "" || seen[s.File]:
			return fmt.Errorf("seed %q: file %q empty or used twice", s.Seed, s.File)
		case len(s.Rows) == 0:
			return fmt.Errorf("seed %q: no rows", s.Seed)
		case s.Command == "" || s.Date == "" || s.Goal == "":
			return fmt.Errorf("seed %q: command, date and goal are required", s.Seed)
		}
		seen[s.File] = true
		for _, row := range s.Rows {
			if row.Peer <= 0 || row.Sluice <= 0 {
				return fmt.Errorf("seed %q, row %q: both figures must be positive", s.Seed, row.Label)
			}
		}
	}
	return nil
}

// Ratio is sluice over the peer.
func (row Row) Ratio() float64 { return row.Sluice / row.Peer }

// Figure is the seed's chart: one bar group per row, sluice beside its peer
// and any extra contenders of the same run.
func (s Seed) Figure() *report.Figure {
	c := report.Chart{Title: s.Seed, YLabel: s.Unit, Kind: report.Bar}
	names := []string{"sluice", s.Peer}
	var extras []string
	for _, row := range s.Rows {
		for k := range row.Extra {
			if !contains(extras, k) {
				extras = append(extras, k)
			}
		}
	}
	sort.Strings(extras)
	names = append(names, extras...)
	series := make([]report.Series, len(names))
	for i, n := range names {
		series[i].Name = n
	}
	for _, row := range s.Rows {
		c.Categories = append(c.Categories, row.Label)
		series[0].Values = append(series[0].Values, row.Sluice)
		series[1].Values = append(series[1].Values, row.Peer)
		for i, k := range extras {
			v, ok := row.Extra[k]
			if !ok {
				v = math.NaN()
			}
			series[2+i].Values = append(series[2+i].Values, v)
		}
	}
	c.Series = series
	return &report.Figure{Title: fmt.Sprintf("%s: sluice vs %s (%s, %s)", s.Seed, s.Peer, s.Date, s.Commit), Charts: []report.Chart{c}}
}

// Markdown writes the current table: one row per seed.
func (r *Results) Markdown(w io.Writer) error {
	t := report.Table{Columns: []string{"seed", "what", "sluice", "peer (same run)", "ratio", "goal", "met", "measured", "command"}}
	for _, s := range r.Seeds {
		var sl, pe, ra []string
		for _, row := range s.Rows {
			if s.RatioOnly {
				sl = append(sl, fmt.Sprintf("%s: %s", row.Label, report.Num(row.Sluice)))
				continue
			}
			sl = append(sl, fmt.Sprintf("%s: %s", row.Label, report.Num(row.Sluice)))
			p := fmt.Sprintf("%s: %s", row.Label, report.Num(row.Peer))
			for _, k := range sortedKeys(row.Extra) {
				p += fmt.Sprintf(" (%s: %s)", k, report.Num(row.Extra[k]))
			}
			pe = append(pe, p)
			ra = append(ra, fmt.Sprintf("%.2fx", row.Ratio()))
		}
		peer := s.Peer + ": " + strings.Join(pe, ", ")
		ratio := strings.Join(ra, ", ")
		if s.RatioOnly {
			peer, ratio = s.Peer+" (= 1)", "(the figures are ratios)"
		}
		t.AddRow(fmt.Sprintf("[%s](%s)", s.Seed, s.Detail), s.What,
			strings.Join(sl, ", ")+" "+s.Unit, peer, ratio, s.Goal, s.Met,
			s.Date+", "+s.Commit, "`"+s.Command+"`")
	}
	if _, err := fmt.Fprintf(w, "Machine: %s.\n\n", r.Machine); err != nil {
		return err
	}
	if err := t.Markdown(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, s := range r.Seeds {
		if _, err := fmt.Fprintf(w, "![%s](benchmarks/summary-%s.svg)\n", s.Seed, s.File); err != nil {
			return err
		}
	}
	return nil
}

func splice(page, table string) (string, error) {
	i, j := strings.Index(page, begin), strings.Index(page, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q markers", begin, end)
	}
	return page[:i+len(begin)] + "\n" + table + page[j:], nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]float64) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
