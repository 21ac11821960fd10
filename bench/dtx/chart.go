package main

import (
	"fmt"
	"sort"

	"github.com/sluice-db/sluice/bench/report"
)

// writeChart draws the seed's comparison as grouped bars, one chart per
// client count: Global-TPS of no coordinator, sluice and dtm at each
// amount of business SQL (a missing row draws as 0).
func writeChart(run *report.Run, path string) error {
	cats := []struct{ label, suffix string }{
		{"0 SQL", ", 0 SQL"}, {"2 SQL", ", 2 SQL"}, {"2 SQL + barrier", ", 2 SQL, barrier"},
		{"10 SQL", ", 10 SQL"}, {"10 SQL + barrier", ", 10 SQL, barrier"},
	}
	who := []struct{ name, prefix string }{{"no coordinator", "no coordinator"}, {"sluice", "sluice"}, {"dtm v1.19.0", "dtm"}}
	byThreads := map[int]map[string]float64{}
	var threads []int
	for _, r := range run.Results {
		if byThreads[r.Threads] == nil {
			byThreads[r.Threads] = map[string]float64{}
			threads = append(threads, r.Threads)
		}
		byThreads[r.Threads][r.Workload] = r.TPS
	}
	sort.Ints(threads)
	f := &report.Figure{Title: "Global-TPS (sagas/s): sluice dtx vs dtm v1.19.0 vs no coordinator"}
	for _, t := range threads {
		c := report.Chart{Title: fmt.Sprintf("c=%d", t), YLabel: "Global-TPS", Kind: report.Bar}
		for _, cat := range cats {
			c.Categories = append(c.Categories, cat.label)
		}
		for _, w := range who {
			s := report.Series{Name: w.name}
			for _, cat := range cats {
				s.Values = append(s.Values, byThreads[t][w.prefix+cat.suffix])
			}
			c.Series = append(c.Series, s)
		}
		f.Charts = append(f.Charts, c)
	}
	return report.WriteSVG(path, f)
}
