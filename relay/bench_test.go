package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

func atEnd(r *relay.Reader, end sluice.Position) bool {
	p := r.Position()
	return p.File == end.File && p.Pos == end.Pos
}
