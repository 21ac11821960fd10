package serve

import (
	"context"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/binlogev"
)

// Binlog is what the service serves: a sequence of binlog files whose
// bytes and positions are the source's (the relay log; replicate joins the
// two, so that stage packages do not import each other).
type Binlog interface {
	// Files lists the files in order.
	Files() []string
	// End is the position after the last complete transaction.
	End() sluice.Position
	// Size is a file's size up to its last complete transaction (0 for a
	// file the list does not name).
	Size(file string) int64
	// GTIDPos is the GTID position after the last complete transaction
	// (@@gtid_binlog_pos).
	GTIDPos() (string, error)
	// Has reports whether a position lies within the data.
	Has(pos sluice.Position) bool
	// FDE returns a file's format description event as stored.
	FDE(file string) ([]byte, error)
	// Open reads from a position (a transaction boundary), following
	// rotations and waiting for new data.
	Open(start sluice.Position) (Reader, error)
}

// Reader reads events of complete transactions.
type Reader interface {
	// Next returns the next event, waiting until there is one or ctx ends.
	// The event's Data may be valid only until the next call, and its
	// position's GTIDSet may stay the start's (relay.Reader.Lean).
	Next(ctx context.Context) (Event, error)
	// Position is the position after the last event returned.
	Position() sluice.Position
	Close() error
}

// Event is one stored event and the position after it.
type Event struct {
	Data []byte
	Type replication.EventType
	Pos  sluice.Position
	// Boundary: the event ends a transaction (or stands alone).
	Boundary bool
}

// fdeChecksum reports whether the events after a format description event
// carry a CRC32 trailer.
var fdeChecksum = binlogev.FDEChecksum

// offsetReader is a Reader that also tells its byte offset in the current
// file. Positions are 32 bits (the protocol's, and the source's log_pos)
// and wrap in a file past 4 GiB, which one transaction of gigabytes makes:
// there only offsets tell whether a dump has caught up with the end.
type offsetReader interface {
	Offset() int64
}

// caughtUp reports whether r has read everything up to end, whose file
// holds size bytes of complete transactions.
func caughtUp(r Reader, end sluice.Position, size int64) bool {
	p := r.Position()
	if o, ok := r.(offsetReader); ok && p.File == end.File {
		return o.Offset() >= size
	}
	return p.Compare(end) >= 0
}
