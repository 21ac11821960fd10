//go:build unix

package boltstore

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// BenchmarkSagaLifecycle is the store's share of one 2-step saga as the
// coordinator makes it: the create (4 branches, submitted) and the outcome
// (succeed, the two actions' statuses), each its own Apply, so its own
// group commit; a Claim (which checkpoints) every claimEvery sagas, as
// recovery's once-a-second poll does at ~750 sagas/s. cpu-us/op is the
// process's user+system CPU per saga: wall time includes the disk's wait.
func BenchmarkSagaLifecycle(b *testing.B) {
	b.Run("direct", func(b *testing.B) { benchSaga(b, false, false) })
	b.Run("fdatasync", func(b *testing.B) { benchSaga(b, true, false) })
}

// BenchmarkCheckpoint is the checkpoint's share alone: b.N sagas made as
// in BenchmarkSagaLifecycle (not timed), then checkpointed in one Claim;
// cpu-us/op is its CPU per saga.
func BenchmarkCheckpoint(b *testing.B) { benchSaga(b, false, true) }

// benchSaga runs the benchmark with O_DIRECT log writes, or without; or
// times the checkpoint alone.
func benchSaga(b *testing.B, fdatasync, cpOnly bool) {
	claimEvery := 750
	if cpOnly {
		claimEvery = b.N + 1
	}
	defer func(v bool) { noDirect = v }(noDirect)
	noDirect = fdatasync
	s, err := Open(filepath.Join(b.TempDir(), "dtx.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if s.wal().d == nil && !fdatasync {
		b.Skip("the file system refuses O_DIRECT")
	}
	ctx := context.Background()
	if cpOnly {
		defer func() {
			c0, t0 := cpuTime(b), time.Now()
			b.StartTimer()
			if _, err := s.Claim(ctx, "c1", time.Now(), time.Now().Add(time.Minute), 100); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-c0).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/1e3/float64(b.N), "wall-us/op")
		}()
	}
	payload := `{"amount":30,"user_id":1,"trans_in_result":"","trans_out_result":""}`
	steps := []map[string]string{
		{"action": "http://127.0.0.1:8081/api/busi/TransOut", "compensate": "http://127.0.0.1:8081/api/busi/TransOutCompensate"},
		{"action": "http://127.0.0.1:8081/api/busi/TransIn", "compensate": "http://127.0.0.1:8081/api/busi/TransInCompensate"},
	}
	var id [10]byte
	apply := func(m *dtx.Mutation) {
		errs, err := s.Apply(ctx, []*dtx.Mutation{m})
		if err != nil || errs[0] != nil {
			b.Fatal(err, errs)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if cpOnly {
		b.StopTimer()
	}
	c0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		id[0], id[1], id[2], id[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		id[4] = byte(i * 131)
		gid := hex.EncodeToString(id[:])
		now := time.Now().UTC()
		g := &dtx.Global{Gid: gid, TransType: dtx.TypeSaga, Status: dtx.StatusSubmitted, Steps: steps,
			Payloads: []string{payload, payload}, Protocol: "http", Options: dtx.Options{WaitResult: true},
			CreateTime: now, UpdateTime: now, NextCronTime: now.Add(10 * time.Second), Owner: "c1-" + gid[:6],
			LeaseUntil: now.Add(30 * time.Second)}
		apply(&dtx.Mutation{Gid: gid, Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
		done := g.Clone()
		fin := time.Now().UTC()
		done.Status, done.FinishTime, done.UpdateTime, done.NextCronTime = dtx.StatusSucceed, fin, fin, time.Time{}
		done.BranchStatus = map[string]dtx.BranchState{
			dtx.BranchKey("01", dtx.OpAction): {Status: dtx.StatusSucceed, FinishTime: fin},
			dtx.BranchKey("02", dtx.OpAction): {Status: dtx.StatusSucceed, FinishTime: fin},
		}
		apply(&dtx.Mutation{Gid: gid, Global: done, IfStatus: []string{dtx.StatusSubmitted}, IfOwner: g.Owner,
			BranchUpdates: []dtx.BranchUpdate{
				{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusSucceed, FinishTime: fin},
				{BranchID: "02", Op: dtx.OpAction, Status: dtx.StatusSucceed, FinishTime: fin},
			}})
		if i%claimEvery == claimEvery-1 {
			if _, err := s.Claim(ctx, "c1", fin, fin.Add(time.Minute), 100); err != nil {
				b.Fatal(err)
			}
		}
	}
	if !cpOnly {
		b.StopTimer()
		b.ReportMetric(float64((cpuTime(b)-c0).Microseconds())/float64(b.N), "cpu-us/op")
	}
}

// BenchmarkWALAppend is one group commit of a 400-byte batch (a saga's
// outcome record), O_DIRECT|O_DSYNC or pwrite and fdatasync.
func BenchmarkWALAppend(b *testing.B) {
	for _, fdatasync := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "fdatasync"}[fdatasync]
		b.Run(name, func(b *testing.B) {
			defer func(v bool) { noDirect = v }(noDirect)
			noDirect = fdatasync
			w, err := openWAL(filepath.Join(b.TempDir(), "wal"))
			if err != nil {
				b.Fatal(err)
			}
			defer w.close()
			if w.d == nil && !fdatasync {
				b.Skip("the file system refuses O_DIRECT")
			}
			if err := w.reset(1); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 400)
			buf[0] = 1
			c0 := cpuTime(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if w.off+int64(len(buf)) > walGrow {
					w.off = walHeader
				}
				if err := w.append(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-c0).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
