// Package merge builds the global binlog of several sources (the PolarDB-X
// "global binlog"): it reads each source's relay log and writes one
// ordered stream of binlog events, in whole transactions, ordered by the
// sources' commit times, re-encoded so that one stock MariaDB replica can
// apply it with a multi-domain GTID position.
//
// The merge reads through Input (one per source) and writes through Output
// as a source sends its binlog (an artificial Rotate opens each file), so
// that the relay log's writer can store the merged stream and its reader
// and the binlog service can serve it: replicate joins the packages.
package merge

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-db/sluice"
)

// Config configures a merge.
type Config struct {
	// Dir is the merged binlog's directory: recovery reads its last file
	// there, and the merge keeps its checkpoint (merge.state) there.
	Dir string
	// ServerID is the server id of the events the merge makes (format
	// description, Gtid_list, Binlog_checkpoint, Rotate).
	ServerID uint32
	// Base names the files: Base.000001, Base.000002, ...
	Base string
	// MaxFileSize: a file that reaches it ends after the transaction that
	// crosses it.
	MaxFileSize int64
	// FlushInterval bounds how long merged transactions wait before they
	// are flushed while more keep coming.
	FlushInterval time.Duration
	// Poll is how often the sources' watermarks are read again while the
	// merge waits for one of them.
	Poll time.Duration
	// CheckpointEvery bounds how often merge.state is rewritten.
	CheckpointEvery time.Duration
	// Queue is how many whole transactions are read ahead per source.
	Queue int
	// SpillAbove bounds the bytes of one source's waiting transactions
	// held in memory: the transaction that would pass it waits in a file
	// in SpillDir instead (spill.go).
	SpillAbove int64
	// SpillDir holds those files; it is emptied at start.
	SpillDir string
}

// DefaultSpillAbove is the default of Config.SpillAbove.
const DefaultSpillAbove = 32 << 20

// DefaultConfig returns the defaults for a merged binlog in dir.
func DefaultConfig(dir string, serverID uint32) Config {
	return Config{Dir: dir, ServerID: serverID, Base: "global-bin", MaxFileSize: 256 << 20,
		FlushInterval: 20 * time.Millisecond, Poll: 20 * time.Millisecond, CheckpointEvery: time.Second, Queue: 16,
		SpillAbove: DefaultSpillAbove, SpillDir: spillDirFor(dir)}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "global binlog", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	switch {
	case c.Dir == "":
		return bad("empty directory", "set the task's dir")
	case c.ServerID == 0:
		return bad("server id 0", "set serve.server-id")
	case c.Base == "":
		return bad("empty file base name", "use DefaultConfig")
	case c.MaxFileSize < 4096:
		return bad(fmt.Sprintf("max file size %d", c.MaxFileSize), "set serve.max-binlog-size to 65536 or more")
	case c.FlushInterval <= 0 || c.Poll <= 0 || c.CheckpointEvery <= 0 || c.Queue <= 0:
		return bad("intervals and queue must be positive", "use DefaultConfig")
	case c.SpillAbove < 0:
		return bad(fmt.Sprintf("spill threshold %d", c.SpillAbove), "set serve.merge-memory to a size in bytes")
	case c.SpillDir == "":
		return bad("empty spill directory", "use DefaultConfig")
	}
	return nil
}

// Source is one source of the merge.
type Source struct {
	Name string
	// DomainID is the GTID domain of the source's transactions in the
	// merged binlog. A source's own sequence numbers are kept, so that
	// the merged position of a domain names the source's transaction.
	DomainID uint32
	// ServerID, when not 0, replaces the source's server id in its events.
	ServerID uint32
	// Start is the source's GTID position where its relay starts, for a
	// new merged binlog's first Gtid_list (MariaDB form, one domain).
	Start string
	// Open reads the source's relay log from a transaction boundary; an
	// empty position means the relay's first file from its start.
	Open func(start sluice.Position) (Input, error)
	// Heard is what the relay's writer last heard from the source (an
	// event or a heartbeat): the source's position and when. It feeds the
	// watermark that lets the merge pass an idle source by.
	Heard func() (pos sluice.Position, at time.Time)
}

// Input is one source's relay log being read.
type Input interface {
	// Next returns the next event of complete transactions, waiting until
	// there is one or ctx ends.
	Next(ctx context.Context) (Event, error)
	// FDE returns the format description event of a file of the relay.
	FDE(file string) ([]byte, error)
	Close() error
}

// Event is one event of a source's relay and the position after it.
type Event struct {
	Data []byte
	Pos  sluice.Position
	// Boundary: the event ends a transaction or stands alone.
	Boundary bool
}

// Output stores the merged stream. It receives events as a primary sends
// its binlog: an artificial Rotate (ArtificialRotate) opens a file, or
// reopens the last one at its end after a restart; then the file's events
// with their log positions; a real Rotate ends a file.
type Output interface {
	Write(raw []byte) error
	// Flush makes the transactions written so far durable (fsynced) and
	// visible to readers.
	Flush() error
	// End is the position after the last complete transaction stored,
	// zero when nothing is.
	End() sluice.Position
}
