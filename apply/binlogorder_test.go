package apply_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sandbox"
)

// newSyncer reads inst's binlog as a replica would.
func newSyncer(inst *sandbox.Instance) *replication.BinlogSyncer {
	return replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: uint32(100000 + rand.Intn(1000000)), Flavor: "mariadb", Host: inst.Host(), Port: uint16(inst.Port), User: "root",
		TimestampStringLocation: time.UTC, EventCacheCount: 256, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// targetCommits reads inst's binlog from from to to and returns, per
// committed transaction that inserted rows into schema, the first column of
// each inserted row, in the order the server committed them.
func targetCommits(tb testing.TB, inst *sandbox.Instance, from, to sluice.Position, schema string) [][]int64 {
	tb.Helper()
	syncer := newSyncer(inst)
	defer syncer.Close()
	streamer, err := syncer.StartSync(gmysql.Position{Name: from.File, Pos: from.Pos})
	if err != nil {
		tb.Fatal(err)
	}
	// to is a position the server had already written, so every event
	// read here exists and GetEvent never waits for a new one.
	ctx := context.Background()
	var out [][]int64
	var cur []int64
	pos := sluice.Position{File: from.File, Pos: from.Pos}
	for !after(pos, to) {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			tb.Fatalf("read the target's binlog at %s:%d: %v", pos.File, pos.Pos, err)
		}
		switch e := ev.Event.(type) {
		case *replication.RotateEvent:
			pos.File = string(e.NextLogName)
			continue
		case *replication.RowsEvent:
			if string(e.Table.Schema) == schema && isWrite(ev.Header.EventType) {
				for _, row := range e.Rows {
					id, ok := row[0].(int32) // the tables' INT key
					if !ok {
						tb.Fatalf("binlog row key %v (%T) is not an INT", row[0], row[0])
					}
					cur = append(cur, int64(id))
				}
			}
		case *replication.XIDEvent:
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
		}
		if ev.Header.LogPos != 0 && ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 {
			pos.Pos = ev.Header.LogPos
		}
	}
	if len(cur) > 0 {
		tb.Fatalf("the target's binlog ends inside a transaction at %s:%d", pos.File, pos.Pos)
	}
	return out
}

func isWrite(t replication.EventType) bool {
	return t == replication.WRITE_ROWS_EVENTv0 || t == replication.WRITE_ROWS_EVENTv1 || t == replication.WRITE_ROWS_EVENTv2 ||
		t == replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1
}
