package kafka_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sink/kafka"
)

// TestCompressionOnTheWire: the record batches the broker stores carry the
// codec of sink.kafka.compression (none by default, as Kafka's own
// producer; franz-go alone would use snappy), read from the batches' own
// attributes in a raw fetch, and the events read back are the same.
func TestCompressionOnTheWire(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Kafka")
	}
	k := sandboxtest.StartKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name  string
		codec int16 // the low three bits of a record batch's attributes
	}{{"", 0}, {"zstd", 4}} {
		cfg := kafka.DefaultConfig("cz" + c.name)
		cfg.Brokers, cfg.TopicPrefix, cfg.Compression = []string{k.Addr()}, "cz"+c.name, c.name
		s, err := kafka.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Open(ctx); err != nil {
			t.Fatal(err)
		}
		for _, it := range txnItems("0-1-1", sluice.Position{File: "mysql-bin.000001", Pos: 200, GTIDSet: "0-1-1"}, 1, 2, 3) {
			if err := s.Submit(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
		topic := cfg.TopicPrefix + ".db.t"
		codecs := batchCodecs(t, ctx, k.Addr(), topic)
		if len(codecs) == 0 {
			t.Fatalf("compression %q: no record batch in %s", c.name, topic)
		}
		for _, got := range codecs {
			// Control batches (the commit markers) are never compressed.
			if got != c.codec && got != -1 {
				t.Fatalf("compression %q: a batch of %s has codec %d, want %d (batches %v)", c.name, topic, got, c.codec, codecs)
			}
		}
		var keys []string
		for _, r := range consumeAll(t, k.Addr(), []string{topic}) {
			keys = append(keys, string(r.Key))
		}
		if strings.Join(keys, " ") != `{"id":1} {"id":2} {"id":3}` {
			t.Fatalf("compression %q: events %v, want ids 1, 2, 3", c.name, keys)
		}
	}
}

// batchCodecs fetches partition 0 of topic raw and returns each record
// batch's compression codec (-1 for a control batch).
func batchCodecs(t *testing.T, ctx context.Context, broker, topic string) []int16 {
	t.Helper()
	// Fetch v13 and later name topics by id: ask as a 3.0 client does.
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = 100, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var codecs []int16
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("fetch %s: %v", topic, err)
			}
			b := p.RecordBatches
			// A batch: baseOffset int64, batchLength int32, then
			// partitionLeaderEpoch int32, magic int8, crc int32 and
			// attributes int16 (bit 5: a control batch).
			for len(b) >= 23 {
				n := int(binary.BigEndian.Uint32(b[8:12])) + 12
				attrs := int16(binary.BigEndian.Uint16(b[21:23]))
				if attrs&0x20 != 0 {
					codecs = append(codecs, -1)
				} else {
					codecs = append(codecs, attrs&0x7)
				}
				if n > len(b) {
					break
				}
				b = b[n:]
			}
		}
	}
	return codecs
}
