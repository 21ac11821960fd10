package replicate

import (
	"context"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/merge"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/serve"
)

// The global binlog joins three stage packages here: each source's relay
// log is read by the merge (MergeInput), the merge writes through the
// relay's writer into a relay log of its own (MergeOutput), whose files
// are binlog files like any relay's, and the binlog service serves that
// relay (ServeGlobal).

// MergeInput reads a source's relay for the merge.
func MergeInput(l *relay.Log) func(start sluice.Position) (merge.Input, error) {
	return func(start sluice.Position) (merge.Input, error) {
		r, err := l.NewReader(start, nil)
		if err != nil {
			return nil, err
		}
		return mergeInput{r: r, fde: servedRelay{l, &gtidAtEnd{}}}, nil
	}
}

type mergeInput struct {
	r   *relay.Reader
	fde servedRelay
}

func (in mergeInput) Next(ctx context.Context) (merge.Event, error) {
	ev, err := in.r.NextRaw(ctx)
	return merge.Event{Data: ev.Data, Pos: ev.Pos, Boundary: ev.Boundary}, err
}

func (in mergeInput) FDE(file string) ([]byte, error) { return in.fde.FDE(file) }
func (in mergeInput) Close() error                    { return in.r.Close() }

// WriterHeard is what a relay writer last heard from its source, for the
// merge's watermark.
func WriterHeard(w *relay.Writer) (sluice.Position, time.Time) {
	pos, at, _, _ := w.SourceStatus()
	return pos, at
}

// MergeOutput stores the merged stream in a relay log through its writer.
func MergeOutput(l *relay.Log, w *relay.Writer) merge.Output { return mergeOutput{l: l, w: w} }

type mergeOutput struct {
	l *relay.Log
	w *relay.Writer
}

func (o mergeOutput) Write(raw []byte) error {
	ev := &replication.BinlogEvent{RawData: raw}
	if len(raw) > replication.EventHeaderSize+4 && replication.EventType(raw[4]) == replication.ROTATE_EVENT {
		// The writer reads the rotate's target; the merge's events carry
		// checksums.
		re := &replication.RotateEvent{}
		if err := re.Decode(raw[replication.EventHeaderSize : len(raw)-4]); err != nil {
			return fmt.Errorf("global binlog: rotate event: %w", err)
		}
		ev.Event = re
	}
	return o.w.Write(ev)
}

func (o mergeOutput) Flush() error         { return o.w.Flush() }
func (o mergeOutput) End() sluice.Position { return o.l.End() }

// ServeGlobal serves the merged relay; its GTID position (for
// @@gtid_binlog_pos) is the merge's.
func ServeGlobal(l *relay.Log, m *merge.Merger) serve.Binlog {
	return servedGlobal{servedRelay{l, &gtidAtEnd{}}, m}
}

type servedGlobal struct {
	servedRelay
	m *merge.Merger
}

// GTIDPos is the merge's GTID position.
func (s servedGlobal) GTIDPos() (string, error) { return s.m.GTID(), nil }

func (s servedGlobal) End() sluice.Position {
	p := s.servedRelay.End()
	p.GTIDSet = s.m.GTID()
	return p
}
