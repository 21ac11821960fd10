package replicate

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/serve"
)

// ServeLog gives the binlog service (serve) the relay log to serve; the
// two stage packages meet here rather than import each other.
func ServeLog(l *relay.Log) serve.Binlog { return servedRelay{l, &gtidAtEnd{}} }

type servedRelay struct {
	l *relay.Log
	g *gtidAtEnd
}

// gtidAtEnd caches the relay's GTID position at an end, so that each ask
// reads only what the relay gained since the last one.
type gtidAtEnd struct {
	mu sync.Mutex
	at sluice.Position // with its GTID set
}

// GTIDPos is the GTID position after the relay's last complete
// transaction (@@gtid_binlog_pos): read from the last position it was
// computed at, or from the head of the last file (its Gtid_list).
func (s servedRelay) GTIDPos() (string, error) {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	end := s.l.End()
	if end.File == "" {
		return "", nil
	}
	at := s.g.at
	if at.File != end.File || at.Compare(end) > 0 || !s.l.Has(at) {
		// No cached set in this file: a reader opened at the end without
		// a set scans the file from its head (Gtid_list, the fillers of a
		// relay that started mid-file) to learn the set there. Reading
		// with NextRaw instead would wait forever at the end of a head
		// with no event after it (a relay of an idle source), as NextRaw
		// passes over the fillers to the next event.
		r, err := s.l.NewReader(sluice.Position{File: end.File, Pos: end.Pos}, nil)
		if err != nil {
			return "", err
		}
		defer r.Close()
		s.g.at = r.Position()
		return s.g.at.GTIDSet, nil
	}
	r, err := s.l.NewReader(at, nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		p := r.Position()
		if p.File == end.File && p.Pos >= end.Pos {
			s.g.at = p
			return p.GTIDSet, nil
		}
		if _, err := r.NextRaw(ctx); err != nil {
			return "", err
		}
	}
}

func (s servedRelay) Files() []string              { return s.l.Files() }
func (s servedRelay) End() sluice.Position         { return s.l.End() }
func (s servedRelay) Has(pos sluice.Position) bool { return s.l.Has(pos) }
func (s servedRelay) Size(file string) int64       { return s.l.Size(file) }
func (s servedRelay) Open(start sluice.Position) (serve.Reader, error) {
	// A dump passes events on and needs no GTID sets (serve.Reader).
	r, err := s.l.NewLeanReader(start)
	if err != nil {
		return nil, err
	}
	return servedReader{r}, nil
}

// FDE reads the file's first event, its format description event.
func (s servedRelay) FDE(file string) ([]byte, error) {
	f, err := os.Open(filepath.Join(s.l.Dir(), file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 4+replication.EventHeaderSize)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, fmt.Errorf("relay file %s: %w", file, err)
	}
	size := binary.LittleEndian.Uint32(head[4+9:])
	if head[4+4] != byte(replication.FORMAT_DESCRIPTION_EVENT) || size < replication.EventHeaderSize || size > 1<<20 {
		return nil, fmt.Errorf("relay file %s does not start with a format description event", file)
	}
	raw := make([]byte, size)
	if _, err := f.ReadAt(raw, 4); err != nil {
		return nil, fmt.Errorf("relay file %s: %w", file, err)
	}
	return raw, nil
}

type servedReader struct{ r *relay.Reader }

func (s servedReader) Next(ctx context.Context) (serve.Event, error) {
	ev, err := s.r.NextRaw(ctx)
	return serve.Event{Data: ev.Data, Type: ev.Type, Pos: ev.Pos, Boundary: ev.Boundary}, err
}

func (s servedReader) Position() sluice.Position { return s.r.Position() }
func (s servedReader) Offset() int64             { return s.r.Offset() }
func (s servedReader) Close() error              { return s.r.Close() }
