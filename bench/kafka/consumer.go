package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heartbeatTable is the table whose rows carry their insert time (µs) in
// column ts, for the live part's end-to-end delay.
const heartbeatTable = "bench.heartbeat"

// envelope is the part of a Debezium change event (JsonConverter,
// schemas.enable=false: the bare envelope) the consumer reads. source.file,
// pos and row name one row change in both sluice's and Debezium's events;
// after.ts is the heartbeat's insert time.
type envelope struct {
	After *struct {
		Ts   int64 `json:"ts"`
		Mark int   `json:"mark"`
	} `json:"after"`
	Source struct {
		File string `json:"file"`
		Pos  int64  `json:"pos"`
		Row  int    `json:"row"`
	} `json:"source"`
}

// tally counts what one peer delivered: row-change events (distinct and
// repeated), tombstones, bytes, the first and last arrival, and the
// heartbeats' delays. It is the pure part of the consumer.
type tally struct {
	Events, Dups, Tombstones, Heartbeats int
	// FirstBatch is how many events arrived with the first (one poll):
	// what the peer produced before First, left out of the rate.
	FirstBatch  int
	Bytes       int64
	First, Last time.Time
	MarkSeen    bool
	// HBSince (µs): only heartbeats inserted from then on (the load's
	// start) go into the delay; earlier ones only show a peer is up. A
	// live consumer starts with it at MaxInt64: a heartbeat that arrives
	// before the load starts is never in the delay.
	HBSince int64
	seen    map[string]struct{}
	hist    *hdrhistogram.Histogram // µs
}

func newTally() *tally {
	return &tally{seen: make(map[string]struct{}), hist: hdrhistogram.New(1, 600_000_000, 3)}
}

// add takes one record. A value that does not parse as an envelope is an
// error: the benchmark must not count what it cannot identify.
func (t *tally) add(topic string, key, value []byte, at time.Time) error {
	t.Bytes += int64(len(key) + len(value))
	if value == nil {
		t.Tombstones++
		return nil
	}
	var e envelope
	if err := json.Unmarshal(value, &e); err != nil {
		return fmt.Errorf("topic %s: %w: %.200s", topic, err, value)
	}
	if strings.HasSuffix(topic, "."+heartbeatTable) {
		if e.After != nil {
			t.Heartbeats++
			if e.After.Mark != 0 {
				t.MarkSeen = true
			}
			if e.After.Ts >= t.HBSince {
				_ = t.hist.RecordValue(max(at.UnixMicro()-e.After.Ts, 1))
			}
		}
		return nil
	}
	if e.Source.File == "" {
		return fmt.Errorf("topic %s: event without source.file: %.200s", topic, value)
	}
	id := topic + "/" + e.Source.File + "/" + strconv.FormatInt(e.Source.Pos, 10) + "/" + strconv.Itoa(e.Source.Row)
	if _, dup := t.seen[id]; dup {
		t.Dups++
		return nil
	}
	t.seen[id] = struct{}{}
	if t.Events == 0 {
		t.First = at
	}
	if at.Equal(t.First) {
		t.FirstBatch++
	}
	t.Events++
	t.Last = at
	return nil
}

// delay returns the heartbeats' delay quantiles in ms and their count.
func (t *tally) delay() (p50, p99 float64, n int64) {
	n = t.hist.TotalCount()
	if n == 0 {
		return 0, 0, 0
	}
	return float64(t.hist.ValueAtQuantile(50)) / 1000, float64(t.hist.ValueAtQuantile(99)) / 1000, n
}

// consumer reads one peer's topics from given offsets into a tally, until
// want distinct events (and, with heartbeats, the final marker) arrived.
type consumer struct {
	name string
	cl   *kgo.Client
	want int
	hb   bool

	mu       sync.Mutex
	t        *tally
	onFirst  func() // called once, at the first row-change event
	done     chan struct{}
	doneOnce sync.Once
}

// topicsOf lists a peer's data topics: <prefix>.<db>.sbtest1..n, plus the
// heartbeat table's with hb.
func topicsOf(prefix, db string, tables int, hb bool) []string {
	var ts []string
	for i := 1; i <= tables; i++ {
		ts = append(ts, fmt.Sprintf("%s.%s.sbtest%d", prefix, db, i))
	}
	if hb {
		ts = append(ts, prefix+"."+heartbeatTable)
	}
	return ts
}

// prepareTopics creates the topics (one partition each, so that both peers
// write to the same layout; sluice and Connect would create them too) and
// returns their current end offsets: the consumer starts there, so a
// round sees only what its peer writes.
func prepareTopics(ctx context.Context, brokers []string, topics []string) (map[string]map[int32]kgo.Offset, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	creq := kmsg.NewPtrCreateTopicsRequest()
	for _, tp := range topics {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = tp, 1, -1
		creq.Topics = append(creq.Topics, ct)
	}
	creq.TimeoutMillis = 30000
	cresp, err := creq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	for _, t := range cresp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	for _, tp := range topics {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = tp
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 0, -1 // the end
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
	}
	// A topic just created may not have a leader yet: retry briefly.
	for attempt := 0; ; attempt++ {
		lresp, err := lreq.RequestWith(ctx, cl)
		if err == nil {
			offs := make(map[string]map[int32]kgo.Offset)
			for _, t := range lresp.Topics {
				for _, p := range t.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
						err = fmt.Errorf("end offset of %s: %w", t.Topic, e)
						break
					}
					offs[t.Topic] = map[int32]kgo.Offset{p.Partition: kgo.NewOffset().At(p.Offset)}
				}
			}
			if err == nil && len(offs) == len(topics) {
				return offs, nil
			}
		}
		if attempt == 50 {
			return nil, fmt.Errorf("list end offsets: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newConsumer(name string, brokers []string, offs map[string]map[int32]kgo.Offset, committed bool, want int, hb bool) (*consumer, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(offs), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	c := &consumer{name: name, cl: cl, want: want, hb: hb, t: newTally(), done: make(chan struct{})}
	if hb {
		c.t.HBSince = math.MaxInt64 // until delaySince
	}
	return c, nil
}

// run polls until ctx ends; done closes when the tally is complete.
func (c *consumer) run(ctx context.Context) error {
	defer c.cl.Close()
	for {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("%s[%d]: %w", t, p, err)) })
		if ferr != nil {
			return fmt.Errorf("%s: fetch: %w", c.name, ferr)
		}
		now := time.Now()
		c.mu.Lock()
		before := c.t.Events
		var err error
		fs.EachRecord(func(r *kgo.Record) {
			if err == nil {
				err = c.t.add(r.Topic, r.Key, r.Value, now)
			}
		})
		first := before == 0 && c.t.Events > 0
		complete := c.t.Events >= c.want && (!c.hb || c.t.MarkSeen)
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if first && c.onFirst != nil {
			c.onFirst()
		}
		if complete {
			c.doneOnce.Do(func() { close(c.done) })
		}
	}
}

// delaySince makes the delay count only heartbeats inserted from ts on.
func (c *consumer) delaySince(ts time.Time) {
	c.mu.Lock()
	c.t.HBSince = ts.UnixMicro()
	c.mu.Unlock()
}

// setWant sets the number of events to wait for (the live part knows it
// once the load is over, maybe after every event arrived).
func (c *consumer) setWant(n int) {
	c.mu.Lock()
	c.want = n
	complete := c.t.Events >= c.want && (!c.hb || c.t.MarkSeen)
	c.mu.Unlock()
	if complete {
		c.doneOnce.Do(func() { close(c.done) })
	}
}

// snapshot returns a copy of the counts (not the seen set).
func (c *consumer) snapshot() tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := *c.t
	t.seen = nil
	return t
}
