package relay_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
)

// TestLeanReaderReturnsTheSameEvents: a lean reader (serve's dumps) returns
// the same bytes, types, positions and boundaries as an ordinary one, from a
// file's start and from inside a file (where it goes straight to the start
// once the event there checks out, and refuses a start inside an event), across
// a rotation and for an event larger than the reader's buffer (which it
// cannot read in place).
func TestLeanReaderReturnsTheSameEvents(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	writeSome(t, db)
	mid := masterStatus(t, db) // inside the second file
	sandboxtest.MustExec(t, db, "INSERT INTO d.t (id, v) VALUES (999, 'mid')")
	// One row event of about 3 MB, over the reader's 1 MiB buffer.
	sandboxtest.MustExec(t, db, "INSERT INTO d.t (id, v, b) VALUES (1000, 'huge', REPEAT('h', 3000000))",
		"INSERT INTO d.t (id, v) VALUES (1001, 'after')")
	end := masterStatus(t, db)

	l := openLog(t, t.TempDir(), relay.SyncInterval)
	defer l.Close()
	p := startPump(t, inst, l, sluice.Position{File: start.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)

	compare(t, l, sluice.Position{}, 2)
	compare(t, l, sluice.Position{File: mid.File, Pos: mid.Pos}, 1)
	// Going straight to a start is for event boundaries only: one byte in,
	// the lean reader refuses as the full one does.
	for _, off := range []uint32{1, 9} {
		if r, err := l.NewLeanReader(sluice.Position{File: mid.File, Pos: mid.Pos + off}); err == nil {
			r.Close()
			t.Fatalf("a lean reader opened at %s:%d, inside an event", mid.File, mid.Pos+off)
		}
	}
}

// compare reads the relay from start to its end with both readers; the
// events must span at least files files.
func compare(t *testing.T, l *relay.Log, start sluice.Position, files int) {
	t.Helper()
	plain, err := l.NewReader(start, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	lean, err := l.NewLeanReader(start)
	if err != nil {
		t.Fatal(err)
	}
	defer lean.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, big, seen := 0, 0, map[string]bool{}
	for plain.Position().Compare(l.End()) < 0 {
		want, err := plain.NextRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := lean.NextRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, want.Data) || got.Type != want.Type || got.Boundary != want.Boundary ||
			got.Pos.File != want.Pos.File || got.Pos.Pos != want.Pos.Pos {
			t.Fatalf("from %s, event %d: lean reader gave %s %d bytes ending at %s (boundary %v), plain %s %d bytes ending at %s (boundary %v)",
				start, n, got.Type, len(got.Data), got.Pos, got.Boundary, want.Type, len(want.Data), want.Pos, want.Boundary)
		}
		if got.Pos.GTIDSet != "" {
			t.Fatalf("from %s, event %d: a lean reader started without a GTID set reports %q", start, n, got.Pos.GTIDSet)
		}
		if len(got.Data) > 1<<20 {
			big++
		}
		seen[got.Pos.File] = true
		n++
	}
	if big == 0 || len(seen) < files || n < 5 {
		t.Fatalf("from %s: read %d events, %d over 1 MiB, from files %v: the relay lacks what the test needs", start, n, big, seen)
	}
}
