// Command kafkapeek is the demo's look into Kafka (scripts/demo.sh): it
// reads a topic from its start until two seconds pass without a new event
// (run it after the sink stopped), read_committed as a consumer of sluice's
// exactly-once sink must, counts the change events by Debezium's op, and
// prints the first few.
//
//	go run ./scripts/kafkapeek -brokers 127.0.0.1:9092 -topic demo.sbtest.sbtest1 -show 2
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated host:port")
	topic := flag.String("topic", "", "topic to read")
	show := flag.Int("show", 2, "events to print")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()
	if *topic == "" {
		fmt.Fprintln(os.Stderr, "kafkapeek: -topic is required")
		os.Exit(2)
	}
	if err := peek(strings.Split(*brokers, ","), *topic, *show, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "kafkapeek:", err)
		os.Exit(1)
	}
}

func peek(brokers []string, topic string, show int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ops := map[string]int{}
	shown, seen := 0, 0
	for {
		// Done once a poll finds nothing more for two seconds after the
		// first events: the sink has stopped, so the topic no longer grows.
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%s: read for %s and not done (%d events)", topic, timeout, seen)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		if fs.NumRecords() == 0 && seen > 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if r.Value == nil {
				ops["tombstone"]++
				return
			}
			var ev struct {
				Op string `json:"op"`
			}
			_ = json.Unmarshal(r.Value, &ev)
			ops[ev.Op]++
			if shown < show {
				shown++
				var out bytes.Buffer
				if json.Indent(&out, r.Value, "  ", "  ") == nil {
					fmt.Printf("key %s\n  %s\n", r.Key, out.String())
				}
			}
		})
	}
	names := make([]string, 0, len(ops))
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	var parts []string
	for _, op := range names {
		parts = append(parts, fmt.Sprintf("%s %d", op, ops[op]))
	}
	fmt.Printf("%s: %d events: %s (Debezium's op: r snapshot read, c insert, u update, d delete)\n", topic, seen, strings.Join(parts, ", "))
	return nil
}
