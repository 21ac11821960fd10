package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-db/sluice"
)

// The initial snapshot (migrate --mode all): every row of the selected
// tables as of one consistent source position, as op "r" events, and the
// position itself, all in ONE Kafka transaction. A read_committed consumer
// sees the whole snapshot or none of it; a snapshot cut short (kill -9)
// is aborted when the next sluice of the task starts, which then finds no
// checkpoint and takes a new snapshot. The changes after the position come
// next, from the checkpoint, so there is no gap and no overlap. The
// snapshot must therefore finish within the transaction timeout
// (Config.SnapshotTimeout, at most the broker's transaction.max.timeout.ms).

// BeginSnapshot opens the snapshot's transaction at pos (the consistent
// position the rows are read at). Call it on a sink opened with
// Config.TxnTimeout long enough for the whole snapshot.
func (s *Sink) BeginSnapshot(pos sluice.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.beginLocked(); err != nil {
		return err
	}
	s.inSource = true // the committer must not end the transaction
	s.meta = txnMeta{ts: uint32(time.Now().Unix()), start: pos}
	s.row = 0
	return nil
}

// SnapshotRow writes one row of tb as an op "r" event (a create in
// canal-json). Values are as the decoder gives them.
func (s *Sink) SnapshotRow(ctx context.Context, tb *sluice.Table, row []any) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.enc.plan(tb)
	if err := s.ensureTopic(ctx, p.topic, s.cfg.Partitions, nil); err != nil {
		s.fail(err)
		return err
	}
	ch := sluice.RowChange{Kind: sluice.Insert, Table: tb, After: row}
	now := time.Now()
	var value []byte
	if s.cfg.Format == FormatCanalJSON {
		value = p.encoded(s.enc.canalValue(p.valueBuf(), &ch, &s.meta, now))
	} else {
		value = p.encoded(s.enc.debeziumValue(p.valueBuf(), &ch, &s.meta, s.row, 'r', now))
	}
	s.row++
	s.batch.Events++
	s.produce(ctx, &kgo.Record{Topic: p.topic, Key: s.enc.recordKey(tb, row), Value: value})
	if err := s.produceFailed(); err != nil {
		return s.produceErr(ctx, err)
	}
	return nil
}

// CommitSnapshot writes the checkpoint (pos, the schema state) and commits
// the snapshot's transaction.
func (s *Sink) CommitSnapshot(ctx context.Context, pos sluice.Position, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inSource = false
	s.last, s.state = pos, state
	if err := s.commitLocked(ctx); err != nil {
		s.fail(err)
		return err
	}
	return nil
}
