package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sink/kafka"
)

func testTable() *sluice.Table {
	return &sluice.Table{Ref: sluice.TableRef{Schema: "db", Name: "t"}, PK: []int{0},
		Columns: []sluice.Column{{Name: "id", DataType: "int", FullType: "int(11)"}, {Name: "v", DataType: "varchar", FullType: "varchar(20)"}}}
}

func txnItems(gtid string, end sluice.Position, ids ...int32) []sluice.StreamItem {
	tb := testTable()
	var ch []sluice.RowChange
	for _, id := range ids {
		ch = append(ch, sluice.RowChange{Kind: sluice.Insert, Table: tb, After: []any{id, "x"}})
	}
	return []sluice.StreamItem{{Kind: sluice.ItemBegin, GTID: gtid, Timestamp: 1700000000},
		{Kind: sluice.ItemRows, GTID: gtid, Changes: ch}, {Kind: sluice.ItemCommit, End: end}}
}

// TestMissingTopicIsAClearError: with create-topics off and the broker's
// auto-creation off, a missing topic stops the sink with one line that
// names the topic and the fix, and nothing of the transaction is visible.
func TestMissingTopicIsAClearError(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Kafka")
	}
	k := sandboxtest.StartKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The offsets topic itself missing.
	cfg := kafka.DefaultConfig("missing")
	cfg.Brokers, cfg.TopicPrefix, cfg.CreateTopics = []string{k.Addr()}, "mt", false
	s, err := kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Open(ctx)
	s.Close()
	if !errors.Is(err, kafka.ErrUnknownTopic) || !strings.Contains(err.Error(), "mt.sluice-offsets") || !strings.Contains(err.Error(), "create-topics") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("offsets topic missing: got %v", err)
	}

	// The offsets topic exists (made by a sink that may create topics),
	// the table's topic does not.
	cfg.CreateTopics = true
	s, err = kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx, sluice.Position{File: "mysql-bin.000001", Pos: 4}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg.CreateTopics = false
	s, err = kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	var werr error
	for _, it := range txnItems("0-1-1", sluice.Position{File: "mysql-bin.000001", Pos: 100}, 1) {
		if werr = s.Submit(ctx, it); werr != nil {
			break
		}
	}
	if werr == nil {
		werr = s.Flush(ctx)
	}
	if !errors.Is(werr, kafka.ErrUnknownTopic) || !strings.Contains(werr.Error(), "mt.db.t") || !strings.Contains(werr.Error(), "create-topics") || strings.Contains(werr.Error(), "\n") {
		t.Fatalf("table topic missing: got %v", werr)
	}
	t.Logf("the error: %v", werr)
	if recs := consumeAll(t, k.Addr(), []string{"mt.sluice-offsets"}); len(recs) != 1 {
		t.Fatalf("offsets topic holds %d committed records, want the seed's 1", len(recs))
	}
}

// TestRestartFencesTheZombie: a second sink of the same task (a restarted
// sluice) takes the transactional id over; the first one's open
// transaction is aborted and its commit fails, so a read_committed
// consumer never sees what the zombie wrote, and the new sink resumes from
// the last committed position.
func TestRestartFencesTheZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Kafka")
	}
	k := sandboxtest.StartKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := kafka.DefaultConfig("fence")
	cfg.Brokers, cfg.TopicPrefix = []string{k.Addr()}, "fz"
	cfg.CommitInterval = time.Hour // commits only when asked
	open := func() (*kafka.Sink, kafka.Checkpoint, bool) {
		s, err := kafka.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cp, ok, err := s.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s, cp, ok
	}
	a, _, ok := open()
	if ok {
		t.Fatal("a new task has a checkpoint")
	}
	first := sluice.Position{File: "mysql-bin.000001", Pos: 200, GTIDSet: "0-1-1"}
	for _, it := range txnItems("0-1-1", first, 1, 2) {
		if err := a.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The zombie writes a second transaction but has not committed it
	// when its successor starts.
	for _, it := range txnItems("0-1-2", sluice.Position{File: "mysql-bin.000001", Pos: 300, GTIDSet: "0-1-2"}, 3) {
		if err := a.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	b, cp, ok := open()
	defer b.Close()
	if !ok || cp.Pos != first {
		t.Fatalf("the successor resumes from %+v (ok %v), want %+v", cp.Pos, ok, first)
	}
	if err := a.Flush(ctx); err == nil {
		t.Fatal("the zombie committed after its successor started")
	}
	a.Close()
	for _, it := range txnItems("0-1-2", sluice.Position{File: "mysql-bin.000001", Pos: 300, GTIDSet: "0-1-2"}, 3) {
		if err := b.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := consumeAll(t, k.Addr(), []string{"fz.db.t"})
	var keys []string
	for _, r := range recs {
		keys = append(keys, string(r.Key))
	}
	if strings.Join(keys, " ") != `{"id":1} {"id":2} {"id":3}` {
		t.Fatalf("committed events %v, want ids 1, 2, 3 once each", keys)
	}
}
