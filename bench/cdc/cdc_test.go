package main

import (
	"strings"
	"testing"
)

// The consumer flag takes the password from the environment (so it never
// shows in ps), an optional marker count, and refuses what it cannot read.
func TestParseEndpoint(t *testing.T) {
	t.Setenv("CDC_TEST_PW", "s3cr@t")
	e, err := parseEndpoint("served=repl:${CDC_TEST_PW}@127.0.0.1:3310/2")
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "served" || e.User != "repl" || e.Password != "s3cr@t" || e.Host != "127.0.0.1" || e.Port != 3310 || e.Markers != 2 {
		t.Fatalf("parsed %+v", e)
	}
	e, err = parseEndpoint("direct=root:@127.0.0.1:3307")
	if err != nil || e.Password != "" || e.Markers != 0 || e.Port != 3307 {
		t.Fatalf("parsed %+v, %v", e, err)
	}
	for _, bad := range []string{"root@127.0.0.1:3307", "d=root:@127.0.0.1", "d=root:@127.0.0.1:x", "d=root:@127.0.0.1:3307/0", "d=root"} {
		if _, err := parseEndpoint(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := parsePos("mysql-bin.000001:4"); err != nil {
		t.Error(err)
	}
	if _, err := parsePos("mysql-bin.000001"); err == nil {
		t.Error("position without :pos accepted")
	}
}

// Each table puts the peer's figure beside sluice's and the ratio; the
// global table compares the merged count with the sources' sum.
func TestMarkdown(t *testing.T) {
	recs := []record{
		{Part: "sysbench", Workload: "oltp_insert", Threads: 16, SourceTPS: 1000, WindowSec: 10, SluiceCPU: 1,
			Consumers: []result{{Name: "served", TPS: 900, BPS: 2e6, Complete: true}, {Name: "direct", TPS: 1000, BPS: 4e6, Complete: true}}},
		{Part: "global", Sources: 2, Workload: "oltp_write_only", Threads: 4,
			Consumers: []result{{Name: "merged", TPS: 300, Txns: 3000, Complete: true}, {Name: "g1", TPS: 100, Txns: 1000}, {Name: "g2", TPS: 200, Txns: 2000}}},
		{Part: "catchup", Round: 1, Consumers: []result{{Name: "served", TPS: 50, BPS: 1e6}}},
		{Part: "catchup", Round: 1, Consumers: []result{{Name: "direct", TPS: 100, BPS: 2e6}}},
		{Part: "large", Size: 1 << 29, Consumers: []result{{Name: "served", LargeBPS: 4e8, LargeDT: 900}, {Name: "direct", LargeBPS: 5e8, LargeDT: 800}}},
	}
	md := markdown(recs)
	for _, want := range []string{
		"| oltp_insert | 16 | 1000 |", "| 0.90x |", "| 0.50x |", "1.0 s (10 %)", // sysbench row: TPS and BPS ratios
		"| 300 | 1.00x | 3000 / 3000 |",                    // global: merged TPS / sum, counts
		"| served | 0 | 1.00 | 50 | 0.50x | 0.50x |",       // catch-up means against direct
		"| 0.5 GB | 900 | 800 | 400.00 | 500.00 | 0.80x |", // large
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// The delay from the commit's OK is arrival - OK (an arrival before the OK
// counts as 0 and as early), and "behind first" is each reader's arrival
// minus the earliest reader's, per heartbeat.
func TestCommitDT(t *testing.T) {
	h := newHBLog()
	for id := int64(1); id <= 100; id++ {
		h.note(hbKey{0, id}, id*1000, id*1000+500) // OK 0.5 ms after the send
	}
	direct := newConsumer(endpoint{Name: "direct"}, 1, 1, 1)
	served := newConsumer(endpoint{Name: "served"}, 2, 1, 1)
	for id := int64(1); id <= 100; id++ {
		direct.arrived[hbKey{0, id}] = id*1000 + 400                // before the OK
		served.arrived[hbKey{0, id}] = id*1000 + 500 + 2000 + id*10 // 2-3 ms after it
	}
	served.arrived[hbKey{1, 7}] = 1 // another source's heartbeat the writer never acked: behind only
	rs := []result{{Name: "direct"}, {Name: "served"}}
	commitDT(rs, []*consumer{direct, served}, h)
	if rs[0].AckEarly != 100 || rs[0].AckDTn != 100 || rs[0].AckDTp99 > 0.01 {
		t.Errorf("direct: %+v", rs[0])
	}
	if rs[1].AckEarly != 0 || rs[1].AckDTn != 100 || rs[1].AckDTp50 < 2.4 || rs[1].AckDTp50 > 2.6 || rs[1].AckDTp99 < 2.9 || rs[1].AckDTp99 > 3.1 {
		t.Errorf("served: %+v", rs[1])
	}
	if rs[0].Behindp99 > 0.01 || rs[1].Behindp50 < 2.5 || rs[1].Behindp50 > 2.7 {
		t.Errorf("behind first: direct %+v served %+v", rs[0], rs[1])
	}
	if p50, p99 := h.commit.ValueAtQuantile(50), h.commit.ValueAtQuantile(99); p50 != 500 || p99 != 500 {
		t.Errorf("commit round trip %d/%d µs", p50, p99)
	}
}
