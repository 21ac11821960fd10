package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// tableCmd turns the run's JSON lines into the seed's three tables, each
// row with the peer's figure from the same load and the ratio.
func tableCmd(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	in := fs.String("in", "", "JSON lines written by run -json")
	out := fs.String("out", "", "Markdown file (default: stdout)")
	_ = fs.Parse(args)
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", *in, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	md := markdown(recs)
	if *out == "" {
		_, err = os.Stdout.WriteString(md)
		return err
	}
	return os.WriteFile(*out, []byte(md), 0o644)
}

func find(r record, name string) (result, bool) {
	for _, c := range r.Consumers {
		if c.Name == name {
			return c, true
		}
	}
	return result{}, false
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func dt(r result) string {
	s := fmt.Sprintf("%.0f / %.0f", r.DTp50, r.DTp99)
	if !r.Complete {
		s += " (incomplete)"
	}
	return s
}

// ackDT is the delay from the commit's OK, with how many heartbeats
// arrived before it (counted as 0).
func ackDT(r result) string {
	if r.AckDTn == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f (%d of %d early)", r.AckDTp50, r.AckDTp99, r.AckEarly, r.AckDTn)
}

func pair(a, b float64) string {
	if a == 0 && b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f", a, b)
}

func mb(v float64) string { return fmt.Sprintf("%.2f", v/1e6) }

func cpuRSS(r record) string {
	pct := 0.0
	if r.WindowSec > 0 {
		pct = 100 * r.SluiceCPU / r.WindowSec
	}
	return fmt.Sprintf("%.1f s (%.0f %%) | %.0f", r.SluiceCPU, pct, r.SluiceRSS)
}

func markdown(recs []record) string {
	var b strings.Builder
	var sb, gl, lg, cu []record
	for _, r := range recs {
		switch r.Part {
		case "sysbench":
			sb = append(sb, r)
		case "global":
			gl = append(gl, r)
		case "large":
			lg = append(lg, r)
		case "catchup":
			cu = append(cu, r)
		}
	}
	if len(sb) > 0 {
		b.WriteString("### sysbench: sluice serve vs MariaDB serving its own binlog (both read at once, same load)\n\n")
		b.WriteString("| workload | threads | source TPS (sysbench) | DT p50 / p99 ms served | DT p50 / p99 ms direct | DT from the OK p50 / p99 ms served | DT from the OK direct | served behind direct p50 / p99 ms | heartbeat commit round trip p50 / p99 ms | BPS MB/s served | BPS direct | BPS ratio | EPS served | EPS direct | TPS served | TPS direct | TPS ratio | sluice CPU | sluice peak RSS MB |\n")
		b.WriteString("| :-- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
		for _, r := range sb {
			s, _ := find(r, "served")
			d, _ := find(r, "direct")
			threads := strconv.Itoa(r.Threads)
			if r.Rate > 0 {
				threads += fmt.Sprintf(" at --rate=%d", r.Rate)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %s | %s |\n",
				r.Workload, threads, r.SourceTPS, dt(s), dt(d), ackDT(s), ackDT(d), pair(s.Behindp50, s.Behindp99), pair(r.HBCommitP50, r.HBCommitP99),
				mb(s.BPS), mb(d.BPS), ratio(s.BPS, d.BPS), s.EPS, d.EPS, s.TPS, d.TPS, ratio(s.TPS, d.TPS), cpuRSS(r))
		}
		b.WriteString("\n")
		b.WriteString("DT is from the heartbeat INSERT's send; \"from the OK\" from its commit's acknowledgement: the delay from the source's commit lies between the two (bench/cdc/commitdt.go). \"served behind direct\" is what sluice adds per heartbeat over MariaDB's own dump.\n\n")
	}
	if len(cu) > 0 {
		b.WriteString(catchupTable(cu))
	}
	if len(gl) > 0 {
		b.WriteString("### Global binlog: the merged stream vs the sum of its sources (all read at once, same load)\n\n")
		b.WriteString("| sources | workload | threads per source | sources' TPS (sysbench, sum) | sources' binlog TPS (direct, sum) | merged TPS | merged / sum | transactions merged / in the sources | DT p50 / p99 ms merged | DT p99 ms direct (worst source) | merged BPS MB/s | merged EPS | sluice CPU | sluice peak RSS MB |\n")
		b.WriteString("| --: | :-- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
		for _, r := range gl {
			m, _ := find(r, "merged")
			var sum, worst float64
			var txns int64
			for _, c := range r.Consumers {
				if c.Name != "merged" {
					sum += c.TPS
					txns += c.Txns
					worst = max(worst, c.DTp99)
				}
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %.0f | %.0f | %.0f | %s | %d / %d | %s | %.0f | %s | %.0f | %s |\n",
				r.Sources, r.Workload, r.Threads, r.SourceTPS, sum, m.TPS, ratio(m.TPS, sum), m.Txns, txns, dt(m), worst, mb(m.BPS), m.EPS, cpuRSS(r))
		}
		b.WriteString("\n")
	}
	if len(lg) > 0 {
		b.WriteString("### Large transactions: one transaction of ~1 MB-row INSERTs\n\n")
		b.WriteString("| size | DT ms served (XID arrival - COMMIT sent) | DT ms direct | BPS MB/s served | BPS direct | BPS ratio | EPS served | EPS direct | sluice CPU | sluice peak RSS MB |\n")
		b.WriteString("| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
		for _, r := range lg {
			s, _ := find(r, "served")
			d, _ := find(r, "direct")
			fmt.Fprintf(&b, "| %.1f GB | %.0f | %.0f | %s | %s | %s | %.1f | %.1f | %s |\n",
				float64(r.Size)/(1<<30), s.LargeDT, d.LargeDT, mb(s.LargeBPS), mb(d.LargeBPS), ratio(s.LargeBPS, d.LargeBPS), s.LargeEPS, d.LargeEPS, cpuRSS(r))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// catchupTable: each read of the finished backlog, then each reader's
// mean and the ratio to the reader named direct.
func catchupTable(cu []record) string {
	var b strings.Builder
	b.WriteString("### Catch-up: the sysbench rows' binlog read again from its start, one reader at a time, as fast as the consumer takes it\n\n")
	b.WriteString("| reader | round | events | MB | seconds | EPS | BPS MB/s | TPS | sluice CPU | sluice peak RSS MB |\n")
	b.WriteString("| :-- | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	type sum struct {
		eps, bps, tps float64
		n             int
	}
	sums := map[string]*sum{}
	var names []string
	for _, r := range cu {
		c := r.Consumers[0]
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.2f | %.0f | %s | %.0f | %s |\n",
			c.Name, r.Round, c.Events, float64(c.Bytes)/1e6, c.Secs, c.EPS, mb(c.BPS), c.TPS, cpuRSS(r))
		if sums[c.Name] == nil {
			sums[c.Name] = &sum{}
			names = append(names, c.Name)
		}
		s := sums[c.Name]
		s.eps, s.bps, s.tps, s.n = s.eps+c.EPS, s.bps+c.BPS, s.tps+c.TPS, s.n+1
	}
	b.WriteString("\n| reader | mean EPS | mean BPS MB/s | mean TPS | TPS / direct | BPS / direct |\n| :-- | --: | --: | --: | --: | --: |\n")
	d := sums["direct"]
	for _, n := range names {
		s := sums[n]
		k := float64(s.n)
		tr, br := "-", "-"
		if d != nil {
			tr, br = ratio(s.tps/k, d.tps/float64(d.n)), ratio(s.bps/k, d.bps/float64(d.n))
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %s | %s |\n", n, s.eps/k, mb(s.bps/k), s.tps/k, tr, br)
	}
	b.WriteString("\n")
	return b.String()
}
