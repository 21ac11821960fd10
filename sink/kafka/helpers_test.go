package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

var srcInst *sandbox.Instance

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "ksrc", Inst: &srcInst}))
}

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position {
	return sandboxtest.MasterStatusGTID(tb, db)
}

// event is one change event as a consumer sees it.
type event struct {
	Topic  string
	Offset int64
	Key    string
	Op     string
	Before map[string]any
	After  map[string]any
	Source map[string]any
	Raw    []byte
}

// id is the event's row id (its "id" column).
func (e event) id() string {
	row := e.After
	if e.Op == "d" {
		row = e.Before
	}
	return text(row["id"])
}

// text prints a decoded JSON value; numbers in full (fmt would print
// 1000001 as 1.000001e+06).
func text(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// endOffsets returns the last stable offsets (read_committed ends) of
// every partition of topics.
func endOffsets(ctx context.Context, cl *kgo.Client, topics []string) (map[string]map[int32]int64, error) {
	return listEnds(ctx, cl, topics, 1)
}

// listEnds returns the ends of topics' partitions: isolation 1 the last
// stable offsets, 0 the high watermarks (uncommitted records included).
func listEnds(ctx context.Context, cl *kgo.Client, topics []string, isolation int8) (map[string]map[int32]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.IsolationLevel = isolation
	for _, t := range mresp.Topics {
		if t.ErrorCode != 0 {
			continue // not created yet: nothing committed
		}
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = *t.Topic
		for _, p := range t.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = p.Partition, -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		lreq.Topics = append(lreq.Topics, lt)
	}
	out := map[string]map[int32]int64{}
	if len(lreq.Topics) == 0 {
		return out, nil
	}
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, t := range lresp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("list offsets %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]int64{}
			}
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out, nil
}

// consumeAll reads every committed record of topics with a read_committed
// consumer of its own (franz-go, no sluice code), up to the ends the
// broker reports when it starts. Tombstones come back with a nil value.
// opts add e.g. a SASL login.
func consumeAll(t testing.TB, broker string, topics []string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(append(opts, kgo.SeedBrokers(broker))...)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends, err := endOffsets(ctx, admin, topics)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]map[int32]kgo.Offset{}
	left := 0
	for tp, ps := range ends {
		for p, end := range ps {
			if end > 0 {
				if parts[tp] == nil {
					parts[tp] = map[int32]kgo.Offset{}
				}
				parts[tp][p] = kgo.NewOffset().AtStart()
				left++
			}
		}
	}
	if left == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(broker), kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	done := map[string]bool{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %v: %v (%d partitions not read to their end)", topics, ctx.Err(), left)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("consume %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
			if done[k] || r.Offset >= ends[r.Topic][r.Partition] {
				return
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= ends[r.Topic][r.Partition] {
				done[k] = true
				left--
			}
		})
	}
	return out
}

func decodeEvents(t testing.TB, recs []*kgo.Record) []event {
	t.Helper()
	var out []event
	for _, r := range recs {
		if r.Value == nil {
			continue // tombstone
		}
		var e event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatalf("event at %s/%d@%d is not JSON: %v: %s", r.Topic, r.Partition, r.Offset, err, r.Value)
		}
		e.Topic, e.Offset, e.Key, e.Raw = r.Topic, r.Offset, string(r.Key), r.Value
		out = append(out, e)
	}
	return out
}

// binlogChange is one row change as mariadb-binlog prints it.
type binlogChange struct {
	Table string // db.table
	Op    string // c, u, d
	ID    string // the first column's value
}

var rowHeader = regexp.MustCompile("^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]+)`\\.`([^`]+)`")

// binlogChanges decodes the source's binlog from start with mariadb-binlog
// (MariaDB's own tool, no sluice code) and returns the row changes of the
// tables of schema db, in binlog order.
func binlogChanges(t testing.TB, inst *sandbox.Instance, start sluice.Position, db string) []binlogChange {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(inst.Home, "data", "mysql-bin.[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var use []string
	for _, f := range files {
		if filepath.Base(f) >= start.File {
			use = append(use, f)
		}
	}
	bin, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		bin = "mysqlbinlog"
	}
	args := append([]string{"--base64-output=decode-rows", "-v", fmt.Sprintf("--start-position=%d", start.Pos)}, use...)
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("mariadb-binlog: %v", err)
	}
	var res []binlogChange
	var cur *binlogChange
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	flush := func() {
		if cur != nil {
			res = append(res, *cur)
			cur = nil
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "###") {
			flush()
			continue
		}
		if m := rowHeader.FindStringSubmatch(line); m != nil {
			flush()
			if m[2] != db {
				continue
			}
			op := map[string]string{"INSERT INTO": "c", "UPDATE": "u", "DELETE FROM": "d"}[m[1]]
			cur = &binlogChange{Table: m[2] + "." + m[3], Op: op}
			section = ""
			continue
		}
		if cur == nil {
			continue
		}
		switch strings.TrimSpace(strings.TrimPrefix(line, "###")) {
		case "WHERE", "SET":
			section = strings.TrimSpace(strings.TrimPrefix(line, "###"))
			continue
		}
		v := strings.TrimSpace(strings.TrimPrefix(line, "###"))
		if strings.HasPrefix(v, "@1=") && (cur.ID == "" || section == "SET" && cur.Op == "u") {
			cur.ID = strings.TrimPrefix(v, "@1=")
		}
	}
	flush()
	return res
}

// decimalText decodes Debezium's precise decimal (base64 of the unscaled
// big-endian two's complement) into its text with scale digits.
func decimalText(v any, scale int) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprint(v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "bad base64 " + s
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
	for len(digits) <= scale {
		digits = "0" + digits
	}
	out := digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	if neg {
		out = "-" + out
	}
	return out
}
