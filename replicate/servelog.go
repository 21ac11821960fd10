package replicate

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/serve"
)

// ServeLog gives the binlog service (serve) the relay log to serve; the
// two stage packages meet here rather than import each other.
func ServeLog(l *relay.Log) serve.Binlog { return servedRelay{l} }

type servedRelay struct{ l *relay.Log }

func (s servedRelay) Files() []string              { return s.l.Files() }
func (s servedRelay) End() sluice.Position         { return s.l.End() }
func (s servedRelay) Has(pos sluice.Position) bool { return s.l.Has(pos) }
func (s servedRelay) Size(file string) int64       { return s.l.Size(file) }
func (s servedRelay) Open(start sluice.Position) (serve.Reader, error) {
	r, err := s.l.NewReader(start, nil)
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
func (s servedReader) Close() error              { return s.r.Close() }
