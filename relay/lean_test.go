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
// the same bytes, types, positions and boundaries as an ordinary one, across
// a rotation and for an event larger than the reader's buffer (which it
// cannot read in place).
func TestLeanReaderReturnsTheSameEvents(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	writeSome(t, db)
	// One row event of about 3 MB, over the reader's 1 MiB buffer.
	sandboxtest.MustExec(t, db, "INSERT INTO d.t (id, v, b) VALUES (1000, 'huge', REPEAT('h', 3000000))",
		"INSERT INTO d.t (id, v) VALUES (1001, 'after')")
	end := masterStatus(t, db)

	l := openLog(t, t.TempDir(), relay.SyncInterval)
	defer l.Close()
	p := startPump(t, inst, l, sluice.Position{File: start.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)

	plain, err := l.NewReader(sluice.Position{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	lean, err := l.NewReader(sluice.Position{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lean.Close()
	lean.Lean()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, big, files := 0, 0, map[string]bool{}
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
			t.Fatalf("event %d: lean reader gave %s %d bytes ending at %s (boundary %v), plain %s %d bytes ending at %s (boundary %v)",
				n, got.Type, len(got.Data), got.Pos, got.Boundary, want.Type, len(want.Data), want.Pos, want.Boundary)
		}
		if got.Pos.GTIDSet != "" {
			t.Fatalf("event %d: a lean reader started without a GTID set reports %q", n, got.Pos.GTIDSet)
		}
		if len(got.Data) > 1<<20 {
			big++
		}
		files[got.Pos.File] = true
		n++
	}
	if big == 0 || len(files) < 2 || n < 20 {
		t.Fatalf("read %d events, %d over 1 MiB, from files %v: the relay lacks what the test needs", n, big, files)
	}
}
