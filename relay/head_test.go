package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
)

// TestRelayStartsAtTheStartPosition: a new relay whose start lies deep in a
// source file fetches only what follows it (issue 16: 385 MB were copied
// before the first useful event). The bytes before the start take a few
// blocks of disk, the bytes after it equal the source's at the same offsets,
// mariadb-binlog reads the whole file with its checksums, and readers learn
// the GTID set at the start and never see the filler.
func TestRelayStartsAtTheStartPosition(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.big (id int primary key, b longblob)",
		"CREATE TABLE d.t (id int primary key, v int)")
	// 40 MB of binlog before the start: more than two fillers of 16 MiB.
	for i := 0; i < 40; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO d.big VALUES (%d, REPEAT('x', 1000000))", i))
	}
	start := masterStatus(t, db)
	if start.Pos < 40e6 {
		t.Fatalf("start %s is not deep in its file", start)
	}
	for i := 1; i <= 20; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO d.t VALUES (%d, %d)", i, i*i))
	}
	end := masterStatus(t, db)
	if end.File != start.File {
		t.Fatalf("the source rotated between %s and %s", start, end)
	}

	dir := t.TempDir()
	l := openLog(t, dir, relay.SyncCommit)
	p := startPump(t, inst, l, start)
	waitEnd(t, l, p, end)
	p.stop(t)

	path := filepath.Join(dir, start.File)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if disk := st.Blocks * 512; disk > 4<<20 {
		t.Errorf("relay file takes %d bytes of disk for %d bytes of events after the start; the head should be a hole", disk, int64(end.Pos-start.Pos))
	}
	src, err := os.ReadFile(filepath.Join(inst.Home, "data", start.File))
	if err != nil {
		t.Fatal(err)
	}
	src = activeFile(src, len(got))
	if len(got) != int(end.Pos) {
		t.Fatalf("relay file holds %d bytes, the source %d", len(got), end.Pos)
	}
	if !bytes.Equal(got[start.Pos:], src[start.Pos:]) {
		t.Fatalf("relay differs from the source after the start, at offset %d", int(start.Pos)+firstDiff(got[start.Pos:], src[start.Pos:]))
	}
	// The FDE is the source's, except that a server sending it mid-file
	// zeroes its "created" field (so a replica does not take it for a
	// server restart), which changes its checksum too.
	fde := 4 + int(le32(src[4+9:]))
	const created = 4 + 19 + 2 + 50
	mask := func(b []byte) []byte {
		b = append([]byte(nil), b[:fde]...)
		copy(b[created:created+4], make([]byte, 4))
		copy(b[fde-4:], make([]byte, 4))
		return b
	}
	if !bytes.Equal(mask(got), mask(src)) {
		t.Fatalf("relay's format description event differs from the source's at %d:\n%x\n%x", firstDiff(got[:fde], src[:fde]), got[:fde], src[:fde])
	}

	// mariadb-binlog reads every event, checks every checksum, and prints
	// the rows after the start with the source's positions.
	bin, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		t.Fatalf("mariadb-binlog not installed: %v", err)
	}
	out, err := exec.Command(bin, "--no-defaults", "--verify-binlog-checksum", "--base64-output=DECODE-ROWS", "-v", path).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-binlog on the relay: %v: %s", err, lastLines(string(out), 20))
	}
	for _, want := range []string{"Gtid list", "###   @1=20", "###   @2=400", fmt.Sprintf("end_log_pos %d", end.Pos)} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("mariadb-binlog output lacks %q:\n%s", want, lastLines(string(out), 40))
		}
	}
	if strings.Contains(string(out), "REPEAT") || strings.Contains(string(out), "@1=39") {
		t.Fatalf("the relay holds a transaction from before the start:\n%s", lastLines(string(out), 40))
	}

	// Readers: from the start without a GTID set, the set is learned from
	// the head; from the relay's beginning, the first event is the first
	// transaction after the start; a position before it is refused.
	l2 := openLog(t, dir, relay.SyncCommit)
	for _, from := range []sluice.Position{{File: start.File, Pos: start.Pos}, {}} {
		r, err := l2.NewReader(from, nil)
		if err != nil {
			t.Fatalf("reader from %v: %v", from, err)
		}
		if got := r.Position().GTIDSet; from.File != "" && got != start.GTIDSet {
			t.Fatalf("GTID set at the start: %q, want %q", got, start.GTIDSet)
		}
		n := 0
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for {
			ev, pos, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("reader from %v: %v", from, err)
			}
			if ev.Header.EventType == replication.IGNORABLE_EVENT {
				t.Fatalf("reader from %v returned a filler ending at %s", from, pos)
			}
			if re, ok := ev.Event.(*replication.RowsEvent); ok {
				n++
				if string(re.Table.Table) != "t" || fmt.Sprint(re.Rows[0][0]) != fmt.Sprint(n) {
					t.Fatalf("reader from %v: row event %d is %s %v", from, n, re.Table.Table, re.Rows[0])
				}
			}
			if _, ok := ev.Event.(*replication.XIDEvent); ok && n == 1 && from.File != "" {
				if pos.GTIDSet == "" || pos.GTIDSet == start.GTIDSet {
					t.Fatalf("GTID set after the first transaction: %q (start %q)", pos.GTIDSet, start.GTIDSet)
				}
			}
			if pos.Pos == end.Pos {
				break
			}
		}
		cancel()
		r.Close()
		if n != 20 {
			t.Fatalf("reader from %v: %d row events, want 20", from, n)
		}
	}
	before := sluice.Position{File: start.File, Pos: 4}
	if l2.Has(before) {
		t.Fatalf("the relay claims to hold %s, which it never fetched", before)
	}
	if _, err := l2.NewReader(before, nil); err == nil || !strings.Contains(err.Error(), "fix:") && !strings.Contains(err.Error(), "relay starts after") {
		t.Fatalf("reader from %s: want a refusal, got %v", before, err)
	}
	if !l2.Has(start) {
		t.Fatalf("the reopened relay does not hold its start %s", start)
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
