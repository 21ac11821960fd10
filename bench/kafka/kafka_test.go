package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tally counts each row change once by (topic, source file, pos, row),
// counts a second delivery as repeated, tombstones apart, the bytes of
// keys and values, and the heartbeats' delay from their after.ts.
func TestTally(t *testing.T) {
	tl := newTally()
	t0 := time.Unix(1000, 0)
	ev := func(file string, pos, row int) []byte {
		return []byte(`{"before":null,"after":{"id":1,"k":2},"source":{"file":"` + file + `","pos":` + itoa(pos) + `,"row":` + itoa(row) + `},"op":"c"}`)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tl.add("sk.sbtest.sbtest1", []byte(`{"id":1}`), ev("mysql-bin.000001", 400, 0), t0))
	must(tl.add("sk.sbtest.sbtest1", []byte(`{"id":2}`), ev("mysql-bin.000001", 400, 1), t0.Add(time.Second)))
	must(tl.add("sk.sbtest.sbtest2", []byte(`{"id":2}`), ev("mysql-bin.000001", 400, 1), t0.Add(2*time.Second))) // other table: distinct
	must(tl.add("sk.sbtest.sbtest1", []byte(`{"id":2}`), ev("mysql-bin.000001", 400, 1), t0.Add(3*time.Second))) // repeated
	must(tl.add("sk.sbtest.sbtest1", []byte(`{"id":2}`), nil, t0.Add(3*time.Second)))                            // tombstone
	if tl.Events != 3 || tl.Dups != 1 || tl.Tombstones != 1 {
		t.Fatalf("events %d dups %d tombstones %d, want 3 1 1", tl.Events, tl.Dups, tl.Tombstones)
	}
	if tl.FirstBatch != 1 {
		t.Fatalf("first batch %d, want 1 (the one event that came at t0)", tl.FirstBatch)
	}
	if !tl.First.Equal(t0) || !tl.Last.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("first %v last %v: the window ends at the last distinct event", tl.First, tl.Last)
	}
	want := int64(5*len(`{"id":1}`) + 4*len(ev("mysql-bin.000001", 400, 0))) // 5 keys, 4 values, the tombstone's none
	if tl.Bytes != want {
		t.Fatalf("bytes %d, want %d", tl.Bytes, want)
	}
	// Heartbeats: one that arrives before the load starts (HBSince still
	// at its start value: not in the delay, though it is newer than the
	// load's start will be), one from before the load that arrives during
	// it (not in the delay), then 10 ms and 30 ms late, then the marker.
	at := t0.Add(10 * time.Second)
	tl.HBSince = math.MaxInt64
	must(tl.add("sk.bench.heartbeat", nil, []byte(`{"after":{"id":0,"ts":`+itoa64(at.Add(-900*time.Millisecond).UnixMicro())+`,"mark":0},"source":{"file":"f","pos":1,"row":0}}`), at.Add(-800*time.Millisecond)))
	tl.HBSince = at.Add(-time.Second).UnixMicro()
	must(tl.add("sk.bench.heartbeat", nil, []byte(`{"after":{"id":0,"ts":`+itoa64(at.Add(-5*time.Second).UnixMicro())+`,"mark":0},"source":{"file":"f","pos":1,"row":0}}`), at))
	for i, late := range []time.Duration{10 * time.Millisecond, 30 * time.Millisecond} {
		v := `{"after":{"id":` + itoa(i) + `,"ts":` + itoa64(at.Add(-late).UnixMicro()) + `,"mark":0},"source":{"file":"f","pos":1,"row":0}}`
		must(tl.add("sk.bench.heartbeat", nil, []byte(v), at))
	}
	if tl.MarkSeen {
		t.Fatal("marker seen before it came")
	}
	must(tl.add("sk.bench.heartbeat", nil, []byte(`{"after":{"id":9,"ts":`+itoa64(at.UnixMicro())+`,"mark":1},"source":{"file":"f","pos":1,"row":0}}`), at))
	p50, p99, n := tl.delay()
	if n != 3 || !tl.MarkSeen || tl.Heartbeats != 5 || tl.Events != 3 {
		t.Fatalf("n %d mark %v heartbeats %d events %d", n, tl.MarkSeen, tl.Heartbeats, tl.Events)
	}
	if p50 < 9.9 || p50 > 10.1 || p99 < 29.9 || p99 > 30.1 {
		t.Fatalf("delay p50 %.2f p99 %.2f ms, want 10 and 30", p50, p99)
	}
	// What it cannot identify is an error, not a silent miscount.
	if err := tl.add("sk.sbtest.sbtest1", nil, []byte(`{"after":{}}`), at); err == nil {
		t.Fatal("an event without source.file was counted")
	}
	if err := tl.add("sk.sbtest.sbtest1", nil, []byte(`not json`), at); err == nil {
		t.Fatal("a value that is no JSON was counted")
	}
}

func TestParsePeer(t *testing.T) {
	p, err := parsePeer("name=sluice,prefix=sk,committed=1,log=/tmp/l,cmd=sluice migrate --config a,b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "sluice" || p.Prefix != "sk" || !p.Committed || p.Log != "/tmp/l" || p.Cmd != "sluice migrate --config a,b.yaml" {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{"name=x,prefix=y", "name=x,cmd=c", "name=x,prefix=y,what=1,cmd=c", "name=x,prefix,cmd=c"} {
		if _, err := parsePeer(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The summary takes each peer's median over the rounds, and the table
// gives the first peer's events/s over the second's.
func TestSummaryAndTable(t *testing.T) {
	rs := []result{
		{Part: "backlog", Round: 1, Name: "sluice", Events: 400, EPS: 90, CPUSecs: 1, TotalSecs: 10},
		{Part: "backlog", Round: 1, Name: "debezium", Events: 400, EPS: 30, CPUSecs: 4, Dups: 2, TotalSecs: 40},
		{Part: "backlog", Round: 2, Name: "debezium", Events: 400, EPS: 10, CPUSecs: 5, TotalSecs: 50},
		{Part: "backlog", Round: 2, Name: "sluice", Events: 400, EPS: 120, CPUSecs: 2, TotalSecs: 12},
		{Part: "backlog", Round: 3, Name: "sluice", Events: 400, EPS: 100, CPUSecs: 3, TotalSecs: 8},
		{Part: "backlog", Round: 3, Name: "debezium", Events: 400, EPS: 20, CPUSecs: 6, TotalSecs: 30},
		{Part: "live", Name: "sluice", Events: 50, DTp50: 12, DTp99: 80, DTn: 100, HBInserted: 101},
	}
	ss := summarize(rs)
	if len(ss) != 2 || ss[0].Name != "sluice" || ss[0].EPS != 100 || ss[1].EPS != 20 || ss[1].Dups != 2 || ss[0].CPU != 2 {
		t.Fatalf("summary %+v", ss)
	}
	if ss[0].CPUPerMEvents != 2.0/400*1e6 {
		t.Fatalf("CPU per M events %v", ss[0].CPUPerMEvents)
	}
	tab := renderTable(rs)
	for _, want := range []string{"sluice / debezium events/s: **5.00×** (goal ≥ 3×), rounds 3.00, 12.00, 5.00", "4.00× as fast", "| sluice | 3 | 400 | 0 | 100 |", "### Live", "| 12.0 | 80.0 | 100 (101) |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	// Another sluice build is an A/B, not the goal's peer.
	rs = append(rs, result{Part: "backlog", Round: 1, Name: "sluice-b", Events: 400, EPS: 45, TotalSecs: 20})
	if tab := renderTable(rs); !strings.Contains(tab, "sluice / sluice-b events/s: **2.22×**, rounds 2.00;") || !strings.Contains(tab, "sluice / debezium events/s: **5.00×** (goal") {
		t.Errorf("A/B ratio:\n%s", tab)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 || median(nil) != 0 {
		t.Error("median")
	}
}

func itoa(i int) string     { return strconv.Itoa(i) }
func itoa64(i int64) string { return strconv.FormatInt(i, 10) }

// The rate leaves out what came with the first arrival (produced before
// the window opened) and scales the bytes by the same share.
func TestRate(t *testing.T) {
	eps, mbps := rate(tally{Events: 1100, FirstBatch: 100, Bytes: 11_000_000}, 2)
	if eps != 500 || mbps != 5 {
		t.Fatalf("eps %v mbps %v, want 500 and 5", eps, mbps)
	}
	if eps, _ := rate(tally{Events: 100, FirstBatch: 100}, 0); eps != 0 {
		t.Fatal("a run that came in one batch has no rate")
	}
}
