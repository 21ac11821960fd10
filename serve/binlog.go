package serve

import (
	"bytes"
	"context"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
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

// fdeChecksum reports whether the events after this format description
// event carry a CRC32 trailer: MySQL 5.6.1+ and every MariaDB since 5.3
// write the algorithm byte just before the FDE's own checksum.
func fdeChecksum(raw []byte) bool {
	const fixed = headerSize + 2 + 50 + 4 + 1
	if len(raw) < fixed+5 {
		return false
	}
	v := string(bytes.TrimRight(raw[headerSize+2:headerSize+52], "\x00"))
	if !strings.Contains(strings.ToLower(v), "mariadb") {
		var n [3]int
		for i, part := range strings.SplitN(v, ".", 3) {
			for _, c := range part {
				if c < '0' || c > '9' {
					break
				}
				n[i] = n[i]*10 + int(c-'0')
			}
		}
		if !(n[0] > 5 || n[0] == 5 && (n[1] > 6 || n[1] == 6 && n[2] >= 1)) {
			return false
		}
	}
	return raw[len(raw)-5] == byte(replication.BINLOG_CHECKSUM_ALG_CRC32)
}
