package merge_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/merge"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/replicate"
)

var errCrash = errors.New("crash")

// crashingOutput stops taking events after a number of writes, as a
// killed process does: what its writer buffered is lost with it.
type crashingOutput struct {
	merge.Output
	left atomic.Int64
}

func (o *crashingOutput) Write(raw []byte) error {
	if o.left.Add(-1) < 0 {
		return errCrash
	}
	return o.Output.Write(raw)
}

func (o *crashingOutput) Flush() error {
	if o.left.Load() < 0 {
		return errCrash
	}
	return o.Output.Flush()
}

// TestMergeRandomized merges 2-4 synthetic sources whose transactions
// arrive bit by bit in a random interleaving, with a crash (the output
// stops mid-stream, a torn tail is appended to its last file) and a
// restart. The merged binlog, read back through the relay reader and
// decoded by go-mysql with checksums verified, must hold every source
// transaction exactly once, in its source's order, whole and contiguous,
// with the source's events (rows values, server id, its own tables), its
// sequence number and its domain id; commit times never going backwards;
// log positions equal to offsets; table ids of one file naming one table
// each; and every file opening with its format description, a Gtid_list of
// the state before it and a Binlog_checkpoint.
func TestMergeRandomized(t *testing.T) {
	seed := sandboxtest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	n := 2 + rng.Intn(3)
	srcs := make([]*synthSource, n)
	for i := range srcs {
		srcs[i] = newSynthSource(rng, i, 1_700_000_000)
	}
	dir := t.TempDir()
	cfg := merge.DefaultConfig(dir, 9000)
	cfg.MaxFileSize = int64(4096 + rng.Intn(8192))
	cfg.CheckpointEvery = time.Duration(1+rng.Intn(30)) * time.Millisecond
	cfg.Queue = 1 + rng.Intn(4)
	// A small threshold: some transactions wait in memory, the others
	// (larger, or behind a queue that holds enough) in spill files.
	cfg.SpillAbove = int64(rng.Intn(400))
	var spilled uint64
	mergeSrcs := make([]merge.Source, n)
	want := make([]string, n)
	for i, s := range srcs {
		mergeSrcs[i] = merge.Source{Name: s.name, DomainID: uint32(10 + i), Open: s.open, Heard: s.heard}
		want[i] = fmt.Sprintf("%d-%d-%d", 10+i, s.serverID, len(s.txns))
	}
	final := strings.Join(want, ",")
	total := 0
	for _, s := range srcs {
		total += len(s.txns)
	}

	run := func(crashAfter int64) {
		rc := relay.DefaultConfig(dir)
		rc.Sync = relay.SyncCommit
		l, err := relay.Open(rc)
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		out := &crashingOutput{Output: replicate.MergeOutput(l, w)}
		out.left.Store(crashAfter)
		if crashAfter == 0 {
			out.left.Store(1 << 62)
		}
		m, err := merge.New(cfg, mergeSrcs, out)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for {
			select {
			case err := <-done:
				if crashAfter > 0 && errors.Is(err, errCrash) {
					// Killed: the writer is not closed, its buffer is lost.
					spilled += m.Status().Spilled
					t.Logf("crashed after %d writes at %s (%d transactions spilled)", crashAfter, m.GTID(), m.Status().Spilled)
					return
				}
				t.Fatalf("merge stopped: %v", err)
			default:
			}
			if m.GTID() == final {
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				spilled += m.Status().Spilled
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("merged %s, want %s, after a minute (status %+v)", m.GTID(), final, m.Status())
			}
			s := srcs[rng.Intn(n)]
			if !s.done() {
				s.publishTxns(1 + rng.Intn(3))
			}
			time.Sleep(time.Duration(rng.Intn(300)) * time.Microsecond)
		}
	}
	run(int64(50 + rng.Intn(total*4)))
	noSpillFiles(t, cfg.SpillDir)
	tearTail(t, dir, rng)
	run(0)
	noSpillFiles(t, cfg.SpillDir)
	if spilled == 0 {
		t.Fatalf("no transaction was spilled with a threshold of %d bytes", cfg.SpillAbove)
	}
	t.Logf("%d transactions spilled (threshold %d bytes)", spilled, cfg.SpillAbove)
	checkMerged(t, dir, srcs)
}

// noSpillFiles: a merge that stopped (or failed) leaves no spill file.
func noSpillFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		t.Fatalf("%d spill files left in %s", len(ents), dir)
	}
}

// tearTail appends part of an event to the last merged file, as a crash
// in the middle of a write leaves it.
func tearTail(t *testing.T, dir string, rng *rand.Rand) {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, relay.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(idx))
	if len(names) == 0 {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, names[len(names)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := ev(replication.MARIADB_GTID_EVENT, 1, 1, 0, make([]byte, 13), 0, true)
	if _, err := f.Write(junk[:1+rng.Intn(len(junk)-1)]); err != nil {
		t.Fatal(err)
	}
}

func checkMerged(t *testing.T, dir string, srcs []*synthSource) {
	t.Helper()
	l, err := relay.Open(relay.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(sluice.Position{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := replication.NewBinlogParser()
	p.SetVerifyChecksum(true)
	end := l.End()
	last := map[uint32]uint64{}  // domain -> last seq
	st := map[uint32]uint64{}    // GTID state before the current file
	var tables map[uint64]string // this file's table ids
	var file string
	var head int // events seen of the current file
	var lastTS uint32
	var cur *synthTxn // open group
	var curSrc *synthSource
	var rows []int32
	var mapped uint64
	txns := 0
	for r.Position().Compare(end) < 0 {
		raw, err := r.NextRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.Parse(raw.Data)
		if err != nil {
			t.Fatalf("go-mysql cannot parse the merged %s event ending at %s: %v", raw.Type, raw.Pos, err)
		}
		if raw.Pos.File != file {
			file, head, tables = raw.Pos.File, 0, map[uint64]string{}
		}
		head++
		if e.Header.LogPos != raw.Pos.Pos {
			t.Fatalf("%s event ending at %s has log_pos %d", raw.Type, raw.Pos, e.Header.LogPos)
		}
		want := map[int]replication.EventType{1: replication.FORMAT_DESCRIPTION_EVENT, 2: replication.MARIADB_GTID_LIST_EVENT, 3: replication.MARIADB_BINLOG_CHECKPOINT_EVENT}
		if w, ok := want[head]; ok && raw.Type != w {
			t.Fatalf("event %d of %s is %s, want %s", head, file, raw.Type, w)
		}
		switch ev := e.Event.(type) {
		case *replication.MariadbGTIDListEvent:
			got := map[uint32]uint64{}
			for _, g := range ev.GTIDs {
				got[g.DomainID] = g.SequenceNumber
			}
			for d, s := range last {
				if got[d] != s {
					t.Fatalf("%s's Gtid_list has %d-?-%d, the files before it end at %d", file, d, got[d], s)
				}
			}
			st = got
		case *replication.MariadbGTIDEvent:
			if cur != nil {
				t.Fatalf("a GTID event at %s inside the transaction %d of %s: not contiguous", raw.Pos, cur.seq, curSrc.name)
			}
			d := ev.GTID.DomainID
			i := int(d) - 10
			if i < 0 || i >= len(srcs) {
				t.Fatalf("GTID %s: no source has domain %d", ev.GTID.String(), d)
			}
			curSrc = srcs[i]
			prev, ok := last[d]
			if !ok {
				prev = st[d]
			}
			if ev.GTID.SequenceNumber != prev+1 {
				t.Fatalf("domain %d: %d follows %d (missing or repeated) at %s", d, ev.GTID.SequenceNumber, prev, raw.Pos)
			}
			if ev.GTID.ServerID != curSrc.serverID {
				t.Fatalf("GTID %s: server id is not the source's %d", ev.GTID.String(), curSrc.serverID)
			}
			last[d] = ev.GTID.SequenceNumber
			cur = &curSrc.txns[ev.GTID.SequenceNumber-1]
			rows = nil
			if e.Header.Timestamp < lastTS {
				t.Fatalf("commit time goes back from %d to %d at %s (%s seq %d)", lastTS, e.Header.Timestamp, raw.Pos, curSrc.name, cur.seq)
			}
			lastTS = e.Header.Timestamp
		case *replication.TableMapEvent:
			name := string(ev.Schema) + "." + string(ev.Table)
			if cur == nil || string(ev.Schema) != "db"+curSrc.name[1:] {
				t.Fatalf("table map of %s at %s outside its source's transaction", name, raw.Pos)
			}
			if prev, ok := tables[ev.TableID]; ok && prev != name {
				t.Fatalf("%s: table id %d names %s and %s", file, ev.TableID, prev, name)
			}
			tables[ev.TableID] = name
			mapped = ev.TableID
		case *replication.RowsEvent:
			if cur == nil || ev.TableID != mapped {
				t.Fatalf("rows event at %s: table id %d, mapped %d", raw.Pos, ev.TableID, mapped)
			}
			rows = append(rows, ev.Rows[0][0].(int32))
		}
		if cur != nil && e.Header.ServerID != curSrc.serverID {
			t.Fatalf("%s event at %s of %s's transaction has server id %d", raw.Type, raw.Pos, curSrc.name, e.Header.ServerID)
		}
		if raw.Boundary && cur != nil {
			if fmt.Sprint(rows) != fmt.Sprint(cur.rows) {
				t.Fatalf("%s transaction %d: rows %v, want %v", curSrc.name, cur.seq, rows, cur.rows)
			}
			if cur.ddl != (raw.Type == replication.QUERY_EVENT) {
				t.Fatalf("%s transaction %d ends with %s", curSrc.name, cur.seq, raw.Type)
			}
			cur = nil
			txns++
		}
	}
	for i, s := range srcs {
		if last[uint32(10+i)] != uint64(len(s.txns)) {
			t.Fatalf("%s: merged up to %d of %d transactions", s.name, last[uint32(10+i)], len(s.txns))
		}
	}
	t.Logf("%d transactions of %d sources in %d files", txns, len(srcs), len(l.Files()))
}

// TestSilentSourceHoldsBack: while a source has sent nothing and its relay
// has heard nothing from it (it is down), the other source's transactions
// are not merged and Status names the silent one; once it is heard from
// (a heartbeat past those transactions' commit time), they are merged.
func TestSilentSourceHoldsBack(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	a, b := newSynthSource(rng, 0, 1_700_000_000), newSynthSource(rng, 1, 1_700_000_000)
	b.fde = a.fde
	dir := t.TempDir()
	rc := relay.DefaultConfig(dir)
	rc.Sync = relay.SyncCommit
	l, err := relay.Open(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w, err := l.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var heardB atomic.Bool
	silent := func() (sluice.Position, time.Time) {
		if !heardB.Load() {
			return sluice.Position{}, time.Time{}
		}
		return b.events[1].Pos, time.Unix(4_000_000_000, 0)
	}
	m, err := merge.New(merge.DefaultConfig(dir, 9000), []merge.Source{
		{Name: "a", DomainID: 1, Open: a.open, Heard: a.heard},
		{Name: "b", DomainID: 2, Open: b.open, Heard: silent},
	}, replicate.MergeOutput(l, w))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b.publishTxns(2) // its relay's head (FDE, Gtid_list), no transaction
	a.publishTxns(len(a.events))
	sandboxtest.Eventually(t, 30*time.Second, "status names the silent source",
		func() bool { return m.Status().Waiting == "b" },
		func() string { return fmt.Sprintf("%+v", m.Status()) })
	if st := m.Status(); st.Transactions != 0 || st.WaitingSince.IsZero() {
		t.Fatalf("merged while a source is silent: %+v", st)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	if got := gather(t, reg); got[`sluice_merge_source_holding_back{source="b"}`] != 1 || got[`sluice_merge_source_holding_back{source="a"}`] != 0 ||
		got[`sluice_merge_source_transactions_total{source="a"}`] != 0 {
		t.Fatalf("metrics while b holds the merge back: %v", got)
	}
	heardB.Store(true)
	want := fmt.Sprintf("1-%d-%d", a.serverID, len(a.txns))
	sandboxtest.Eventually(t, 30*time.Second, "merged up to "+want+" once the silent source was heard from",
		func() bool { return m.GTID() == want },
		func() string { return fmt.Sprintf("merged %s (%+v)", m.GTID(), m.Status()) })
	if st := m.Status(); st.Waiting != "" {
		t.Fatalf("still waiting: %+v", st)
	}
	// The metrics count what a wrote, re-encoded with a CRC32 trailer;
	// b merged nothing. The merged stream's totals are a's plus the
	// merge's own events (at least a format description, Gtid_list and
	// Binlog_checkpoint).
	var events, bytes float64
	for _, tx := range a.txns {
		for _, e := range a.events[tx.first : tx.last+1] {
			events++
			bytes += float64(len(e.Data))
			if !a.crc {
				bytes += 4
			}
		}
	}
	got := gather(t, reg)
	for k, v := range map[string]float64{
		`sluice_merge_source_transactions_total{source="a"}`: float64(len(a.txns)),
		`sluice_merge_source_events_total{source="a"}`:       events,
		`sluice_merge_source_bytes_total{source="a"}`:        bytes,
		`sluice_merge_source_transactions_total{source="b"}`: 0,
		`sluice_merge_source_events_total{source="b"}`:       0,
		`sluice_merge_source_holding_back{source="b"}`:       0,
		`sluice_merge_transactions_total`:                    float64(len(a.txns)),
		`sluice_merge_delay_seconds_count`:                   float64(len(a.txns)),
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if got[`sluice_merge_events_total`] < events+3 || got[`sluice_merge_bytes_total`] <= bytes {
		t.Errorf("merged stream: %v events, %v bytes; a alone wrote %v, %v", got[`sluice_merge_events_total`], got[`sluice_merge_bytes_total`], events, bytes)
	}
	// Both sources were last heard from "in 2096" (nothing more will
	// come): their watermarks are there, and neither lags.
	for _, src := range []string{"a", "b"} {
		if w, l := got[`sluice_merge_source_watermark_timestamp_seconds{source="`+src+`"}`], got[`sluice_merge_source_lag_seconds{source="`+src+`"}`]; w != 4_000_000_000 || l != 0 {
			t.Errorf("source %s: watermark %v, lag %v s", src, w, l)
		}
	}
	st := m.Status()
	if len(st.Sources) != 2 || st.Sources[0].Transactions != uint64(len(a.txns)) || float64(st.Sources[0].Bytes) != bytes || st.Sources[1].Transactions != 0 {
		t.Errorf("status: %+v", st)
	}
}

// gather reads a registry as name{label="value",...} -> value (a
// histogram as its _count).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[k] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[k] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[mf.GetName()+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
