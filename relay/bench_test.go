package relay_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
)

// benchRelay builds a relay of n small single-row transactions (sysbench-like
// events: GTID, annotate, table map, rows, XID).
func benchRelay(b *testing.B, n int) *relay.Log {
	b.Helper()
	inst := sandboxtest.Start(b, "bsrc")
	db := sandboxtest.MustOpen(b, inst, "")
	first := masterStatus(b, db)
	sandboxtest.MustExec(b, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, k int, c char(120), pad char(60))")
	for i := 0; i < n; i += 500 {
		var sb strings.Builder
		sb.WriteString("BEGIN NOT ATOMIC ")
		for j := i; j < i+500 && j < n; j++ {
			fmt.Fprintf(&sb, "INSERT INTO d.t VALUES (%d, %d, REPEAT('c', 119), REPEAT('p', 59)); ", j, j)
		}
		sb.WriteString("END")
		sandboxtest.MustExec(b, db, sb.String())
	}
	end := masterStatus(b, db)
	l := openLog(b, b.TempDir(), relay.SyncNone)
	p := startPump(b, inst, l, sluice.Position{File: first.File, Pos: 4})
	waitEnd(b, l, p, end)
	p.stop(b)
	return l
}

func BenchmarkReader(b *testing.B) {
	l := benchRelay(b, 20000)
	for _, mode := range []string{"raw", "decoded"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			end := l.End()
			var r *relay.Reader
			bytes := int64(0)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if r == nil || atEnd(r, end) {
					if r != nil {
						r.Close()
					}
					var err error
					if r, err = l.NewReader(sluice.Position{}, nil); err != nil {
						b.Fatal(err)
					}
				}
				if mode == "raw" {
					ev, err := r.NextRaw(ctx)
					if err != nil {
						b.Fatal(err)
					}
					bytes += int64(len(ev.Data))
				} else {
					ev, _, err := r.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					bytes += int64(len(ev.RawData))
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			b.SetBytes(bytes / int64(max(b.N, 1)))
			r.Close()
		})
	}
}

// BenchmarkOpenInside measures opening a reader at the relay's end, which
// reads the file's events from its head to find the position.
func BenchmarkOpenInside(b *testing.B) {
	l := benchRelay(b, 20000)
	end := l.End()
	at := sluice.Position{File: end.File, Pos: end.Pos}
	for _, mode := range []string{"full", "lean"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var r *relay.Reader
				var err error
				if mode == "full" {
					r, err = l.NewReader(at, nil)
				} else {
					r, err = l.NewLeanReader(at)
				}
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
			b.ReportMetric(float64(l.Size(end.File))/1e6, "MB")
		})
	}
}

func atEnd(r *relay.Reader, end sluice.Position) bool {
	p := r.Position()
	return p.File == end.File && p.Pos == end.Pos
}

// BenchmarkWriter measures storing events (what the binlog reader delivers)
// into a fresh relay with fsync policy none and commit.
func BenchmarkWriter(b *testing.B) {
	l := benchRelay(b, 20000)
	r, err := l.NewReader(sluice.Position{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	name := l.Files()[0]
	rot := make([]byte, 19+8+len(name))
	rot[4] = byte(replication.ROTATE_EVENT)
	binary.LittleEndian.PutUint32(rot[9:], uint32(len(rot)))
	binary.LittleEndian.PutUint16(rot[17:], replication.LOG_EVENT_ARTIFICIAL_F)
	binary.LittleEndian.PutUint64(rot[19:], 4)
	copy(rot[27:], name)
	evs := []*replication.BinlogEvent{{RawData: rot, Header: &replication.EventHeader{EventType: replication.ROTATE_EVENT, Flags: replication.LOG_EVENT_ARTIFICIAL_F},
		Event: &replication.RotateEvent{Position: 4, NextLogName: []byte(name)}}}
	end := l.End()
	for !atEnd(r, end) {
		ev, err := r.NextRaw(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if ev.Type == replication.ROTATE_EVENT {
			break // one file is enough
		}
		evs = append(evs, &replication.BinlogEvent{RawData: ev.Data, Header: &replication.EventHeader{EventType: ev.Type}})
	}
	r.Close()
	for _, sync := range []relay.SyncPolicy{relay.SyncNone, relay.SyncCommit} {
		b.Run(string(sync), func(b *testing.B) {
			written, bytes := 0, int64(0)
			start := time.Now()
			for written < b.N {
				dst := openLog(b, b.TempDir(), sync)
				w, err := dst.NewWriter()
				if err != nil {
					b.Fatal(err)
				}
				src := &sliceSource{evs: evs}
				if err := w.Run(context.Background(), src); err != errDrained {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				written += len(evs)
				for _, e := range evs {
					bytes += int64(len(e.RawData))
				}
			}
			b.ReportMetric(float64(written)/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64(bytes)/1e6/time.Since(start).Seconds(), "MB/s")
		})
	}
}

var errDrained = errors.New("drained")

// sliceSource hands out events like binlog.Reader: several ready at once,
// then none (the writer flushes), in bursts of 64.
type sliceSource struct {
	evs []*replication.BinlogEvent
	i   int
}

func (s *sliceSource) TryEvent() (*replication.BinlogEvent, bool) {
	if s.i >= len(s.evs) || s.i%64 == 0 {
		return nil, false
	}
	s.i++
	return s.evs[s.i-1], true
}

func (s *sliceSource) GetEvent(context.Context) (*replication.BinlogEvent, error) {
	if s.i >= len(s.evs) {
		return nil, errDrained
	}
	s.i++
	return s.evs[s.i-1], nil
}
