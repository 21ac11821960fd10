package serve

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice"
)

// atOffset is a Reader that stands still at a file offset: caughtUp only
// asks a reader where it is. (relay.Reader, through replicate's
// servedReader, is the real one; relay.TestFilePast4GiB reads past 4 GiB
// with it.)
type atOffset struct {
	file string
	off  int64
}

func (r atOffset) Next(context.Context) (Event, error) { return Event{}, context.Canceled }
func (r atOffset) Position() sluice.Position {
	return sluice.Position{File: r.file, Pos: uint32(r.off)}
}
func (r atOffset) Offset() int64 { return r.off }
func (r atOffset) Close() error  { return nil }

// posOnly is a Reader without offsets (the global binlog's).
type posOnly struct{ atOffset }

func (r posOnly) Offset() {}

// TestCaughtUpPast4GiB: in a file past 4 GiB (one huge transaction), the
// end's position wraps to a small number; a dump 3 GiB into the file has
// not caught up with it, though its position compares above the end's.
// Comparing positions, the dump flushed and armed a heartbeat timer per
// event and ended a non-blocking dump (mariadb-binlog) 4 GiB early.
func TestCaughtUpPast4GiB(t *testing.T) {
	const f = "mysql-bin.000001"
	size := int64(1<<32 + 100)
	end := sluice.Position{File: f, Pos: uint32(size)}
	for _, c := range []struct {
		off  int64
		want bool
	}{{3 << 30, false}, {size - 1, false}, {size, true}} {
		if got := caughtUp(atOffset{f, c.off}, end, size); got != c.want {
			t.Errorf("reader at offset %d, end %d: caught up %v, want %v", c.off, size, got, c.want)
		}
	}
	// Another file, or a reader without offsets: positions decide.
	if caughtUp(atOffset{"mysql-bin.000000", 5 << 30}, end, size) {
		t.Error("a reader in an earlier file has caught up")
	}
	if !caughtUp(posOnly{atOffset{f, 200}}, end, size) || caughtUp(posOnly{atOffset{f, 50}}, end, size) {
		t.Error("a reader without offsets is not compared by position")
	}
}
