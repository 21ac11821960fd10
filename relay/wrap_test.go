package relay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// TestFilePast4GiB: a source binlog file grows past 4 GiB when one
// transaction is larger than the room max_binlog_size leaves (a 2 GB bulk
// insert of 1 MiB rows by prepared statements is 4.3 GB of binlog: each
// row's Annotate_rows event repeats its value), and the server writes each
// event's log_pos modulo 2^32. The relay must go on storing such events
// byte for byte, publish them, read them back, and find the boundary after
// them again when it is reopened. bench-cdc's 2 GB row stopped sluice serve
// with "gap or overlap" at the wrap before the writer compared log_pos
// modulo 2^32.
//
// The file is sparse: the writer is put at an offset just under 4 GiB
// after a first transaction (the bytes between are a hole, never read), so
// the test writes kilobytes, not gigabytes.
func TestFilePast4GiB(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.Sync = SyncCommit
	const name = "mysql-bin.000001"
	l, w, g := synthRelay(t, cfg, name, 1)
	for _, raw := range g.txn() {
		writeRaw(t, w, raw)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	// Jump to 1 KiB under 4 GiB: the next transaction's events straddle
	// the wrap, and the one after lies wholly past it.
	const jump = 1<<32 - 1024
	if err := w.f.Truncate(jump); err != nil {
		t.Skipf("no sparse file of 4 GiB here: %v", err)
	}
	if _, err := w.f.Seek(jump, 0); err != nil {
		t.Fatal(err)
	}
	w.bw.Reset(w.f)
	w.size, w.boundary, g.off = jump, jump, jump
	var want [][]byte
	for i := 0; i < 2; i++ {
		evs := [][]byte{g.gtid(8), g.event(replication.TABLE_MAP_EVENT, make([]byte, 30), 0)}
		body := bytes.Repeat([]byte{byte('a' + i)}, 3000)
		evs = append(evs, g.event(replication.WRITE_ROWS_EVENTv1, body, 0), g.event(replication.XID_EVENT, make([]byte, 8), 0))
		for _, raw := range evs {
			writeRaw(t, w, raw)
		}
		want = append(want, evs...)
	}
	if h, _ := parseHeader(want[len(want)-1]); int64(h.LogPos) >= g.off || g.off <= 1<<32 {
		t.Fatalf("the events do not wrap: last log_pos %d, offset %d", h.LogPos, g.off)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := l.Size(name); got != g.off {
		t.Fatalf("published %d bytes of %s, want %d (past 4 GiB)", got, name, g.off)
	}

	// A dump reading on from under 4 GiB (a position the protocol can
	// name) gets the events back as written, with offsets past the wrap.
	r, err := l.NewLeanReader(sluice.Position{File: name, Pos: jump})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	off := int64(jump)
	for i, raw := range want {
		ev, err := r.NextRaw(ctx)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(ev.Data, raw) {
			t.Fatalf("event %d (%s) differs from what was written", i, ev.Type)
		}
		off += int64(len(raw))
		if r.Offset() != off || ev.Pos.Pos != uint32(off) {
			t.Fatalf("event %d: reader at offset %d, position %d; want %d (position %d, as log_pos)", i, r.Offset(), ev.Pos.Pos, off, uint32(off))
		}
		if ev.Boundary != (i == 3 || i == 7) {
			t.Fatalf("event %d (%s): boundary %v", i, ev.Type, ev.Boundary)
		}
	}
	r.Close()

	// A real gap is still refused, past the wrap as before it.
	end := g.off
	g.gtid(8) // an event the relay never gets
	raw := g.event(replication.XID_EVENT, make([]byte, 8), 0)
	h, _ := parseHeader(raw)
	err = w.Write(&replication.BinlogEvent{RawData: raw, Header: &replication.EventHeader{EventType: h.Type, LogPos: h.LogPos}})
	if err == nil || !strings.Contains(err.Error(), "gap or overlap") {
		t.Fatalf("an event after a missing one: %v, want a gap error", err)
	}

	// Reopened, the relay ends after the last transaction, past 4 GiB.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := l2.Size(name); got != end {
		t.Fatalf("reopened: %s holds %d bytes, want %d", name, got, end)
	}
	if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() != end {
		t.Fatalf("reopened: file size %v (%v), want %d", st, err, end)
	}

	// An applier's checkpoint after the first wrapped transaction names
	// it by log_pos, which is also an offset in the file's first 4 GiB
	// (here in the first transaction). Readers resume at the offset past
	// the wrap: the second transaction's events, as written.
	after := int64(jump)
	for _, raw := range want[:4] {
		after += int64(len(raw))
	}
	at := sluice.Position{File: name, Pos: uint32(after), GTIDSet: "0-1-1"}
	if int64(at.Pos) >= after {
		t.Fatalf("position %d does not wrap (offset %d)", at.Pos, after)
	}
	for _, lean := range []bool{false, true} {
		var r *Reader
		if lean {
			r, err = l2.NewLeanReader(at)
		} else {
			r, err = l2.NewReader(at, nil)
		}
		if err != nil {
			t.Fatalf("lean %v: open at %s (offset %d): %v", lean, at, after, err)
		}
		for i, raw := range want[4:] {
			ev, err := r.NextRaw(ctx)
			if err != nil {
				t.Fatalf("lean %v: event %d after %s: %v", lean, i, at, err)
			}
			if !bytes.Equal(ev.Data, raw) {
				t.Fatalf("lean %v: event %d after %s is not the second transaction's (%s, offset %d)", lean, i, at, ev.Type, r.Offset()-int64(len(ev.Data)))
			}
		}
		r.Close()
	}
}

// TestReaderRefusesAStartInsideAnEvent: a reader given a GTID set goes
// straight to its start position; one inside an event (a checkpoint that
// is not one) is an error, where the reader once handed out the middle of
// the event as an unknown event.
func TestReaderRefusesAStartInsideAnEvent(t *testing.T) {
	const name = "mysql-bin.000001"
	l, w, g := synthRelay(t, DefaultConfig(t.TempDir()), name, 2)
	first := g.off
	for i := 0; i < 3; i++ {
		for _, raw := range g.txn() {
			writeRaw(t, w, raw)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r, err := l.NewReader(sluice.Position{File: name, Pos: uint32(first), GTIDSet: "0-1-1"}, nil); err != nil {
		t.Fatalf("at the first transaction: %v", err)
	} else {
		r.Close()
	}
	at := sluice.Position{File: name, Pos: uint32(first) + 7, GTIDSet: "0-1-1"}
	r, err := l.NewReader(at, nil)
	if err == nil {
		r.Close()
		t.Fatalf("a start inside an event (%s) was accepted", at)
	}
	if !strings.Contains(err.Error(), "not an event boundary") {
		t.Fatalf("a start inside an event: %v", err)
	}
}
