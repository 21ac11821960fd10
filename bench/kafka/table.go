package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func tableCmd(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	in := fs.String("in", "", "the JSON lines of kafka-bench run")
	_ = fs.Parse(args)
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	rs, err := readResults(f)
	if err != nil {
		return err
	}
	fmt.Print(renderTable(rs))
	return nil
}

func readResults(r io.Reader) ([]result, error) {
	var rs []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var x result
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("%w: %.100s", err, sc.Text())
		}
		rs = append(rs, x)
	}
	return rs, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// summary is one peer's medians over the backlog rounds.
type summary struct {
	Name                                                      string
	Rounds, Events, Dups                                      int
	EPS, MBps, Secs, StartSecs, TotalSecs, CPU, CPUTotal, RSS float64
	CPUPerMEvents                                             float64 // CPU seconds per million events (window)
}

func summarize(rs []result) []summary {
	var names []string
	by := map[string][]result{}
	for _, x := range rs {
		if x.Part != "backlog" {
			continue
		}
		if _, ok := by[x.Name]; !ok {
			names = append(names, x.Name)
		}
		by[x.Name] = append(by[x.Name], x)
	}
	var out []summary
	for _, n := range names {
		xs := by[n]
		col := func(f func(result) float64) float64 {
			v := make([]float64, len(xs))
			for i, x := range xs {
				v[i] = f(x)
			}
			return median(v)
		}
		s := summary{Name: n, Rounds: len(xs), Events: xs[0].Events,
			EPS: col(func(x result) float64 { return x.EPS }), MBps: col(func(x result) float64 { return x.MBps }),
			Secs: col(func(x result) float64 { return x.Secs }), StartSecs: col(func(x result) float64 { return x.StartSecs }),
			TotalSecs: col(func(x result) float64 { return x.TotalSecs }),
			CPU:       col(func(x result) float64 { return x.CPUSecs }), CPUTotal: col(func(x result) float64 { return x.CPUTotal }),
			RSS: col(func(x result) float64 { return x.RSSMB })}
		for _, x := range xs {
			s.Dups += x.Dups
		}
		if s.Events > 0 {
			s.CPUPerMEvents = s.CPU / float64(s.Events) * 1e6
		}
		out = append(out, s)
	}
	return out
}

// renderTable prints the backlog's per-round rows, the medians with the
// ratio of the first peer to the second, and the live rows.
func renderTable(rs []result) string {
	var b strings.Builder
	b.WriteString("### Backlog: each peer alone turns the same binlog into Kafka events\n\n")
	b.WriteString("| round | peer | events | repeated | first event after | first→last | start→last | events/s | MB/s | CPU s (window) | CPU s (from start) | peak RSS MB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range rs {
		if x.Part == "backlog" {
			fmt.Fprintf(&b, "| %d | %s | %d | %d | %.1f s | %.1f s | %.1f s | %.0f | %.2f | %.1f | %.1f | %.0f |\n",
				x.Round, x.Name, x.Events, x.Dups, x.StartSecs, x.Secs, x.TotalSecs, x.EPS, x.MBps, x.CPUSecs, x.CPUTotal, x.RSSMB)
		}
	}
	ss := summarize(rs)
	b.WriteString("\nMedians over the rounds:\n\n")
	b.WriteString("| peer | rounds | events | repeated (all rounds) | events/s | MB/s | first event after | start→last | CPU s (window) | CPU s per M events | CPU s (from start) | peak RSS MB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f | %.2f | %.1f s | %.1f s | %.1f | %.1f | %.1f | %.0f |\n",
			s.Name, s.Rounds, s.Events, s.Dups, s.EPS, s.MBps, s.StartSecs, s.TotalSecs, s.CPU, s.CPUPerMEvents, s.CPUTotal, s.RSS)
	}
	// The first peer (sluice) against each other one: the goal is
	// against Debezium; other sluice builds (SLUICE_B) are an A/B.
	for _, o := range ss[min(1, len(ss)):] {
		if o.EPS <= 0 || ss[0].TotalSecs <= 0 {
			continue
		}
		goal := ""
		if o.Name == "debezium" {
			goal = " (goal ≥ 3×)"
		}
		fmt.Fprintf(&b, "\n%s / %s events/s: **%.2f×**%s, rounds %s; backlog turned into events, start to last event: %.2f× as fast\n",
			ss[0].Name, o.Name, ss[0].EPS/o.EPS, goal, roundRatios(rs, ss[0].Name, o.Name), o.TotalSecs/ss[0].TotalSecs)
	}
	live := false
	for _, x := range rs {
		if x.Part != "live" {
			continue
		}
		if !live {
			b.WriteString("\n### Live: both peers read while the load runs\n\n")
			b.WriteString("| peer | source TPS | events | repeated | events/s | MB/s | delay p50 ms | delay p99 ms | heartbeats (of inserted) | CPU s | peak RSS MB |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
			live = true
		}
		fmt.Fprintf(&b, "| %s | %.0f | %d | %d | %.0f | %.2f | %.1f | %.1f | %d (%d) | %.1f | %.0f |\n",
			x.Name, x.SourceTPS, x.Events, x.Dups, x.EPS, x.MBps, x.DTp50, x.DTp99, x.DTn, x.HBInserted, x.CPUSecs, x.RSSMB)
	}
	return b.String()
}

// roundRatios are a's events/s over b's in each backlog round both ran.
func roundRatios(rs []result, a, b string) string {
	eps := map[string]map[int]float64{a: {}, b: {}}
	var rounds []int
	for _, x := range rs {
		if x.Part == "backlog" && eps[x.Name] != nil {
			if x.Name == a {
				rounds = append(rounds, x.Round)
			}
			eps[x.Name][x.Round] = x.EPS
		}
	}
	var out []string
	for _, r := range rounds {
		if eps[b][r] > 0 {
			out = append(out, fmt.Sprintf("%.2f", eps[a][r]/eps[b][r]))
		}
	}
	return strings.Join(out, ", ")
}
