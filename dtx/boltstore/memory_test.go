//go:build linux

package boltstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// bigSagas are n creates of sagas with a payload of size bytes each.
func bigSagas(prefix string, n, size int) []*dtx.Mutation {
	pay := strings.Repeat("x", size)
	var muts []*dtx.Mutation
	for i := 0; i < n; i++ {
		g := saga(fmt.Sprintf("%s-%d", prefix, i), dtx.StatusSubmitted, "o", time.Now().UTC())
		g.Payloads = []string{pay}
		muts = append(muts, &dtx.Mutation{Gid: g.Gid, Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
	}
	return muts
}

// TestLargeBatchInPieces: a batch of large sagas goes to the log in
// writes of about walFlush, not one write of the whole batch, and the
// aligned write buffer is not kept past maxKeptBlock (issue 30: a flood
// of 1 MB submits held a batch's records twice, doubled by append, and
// pinned a 95 MB write buffer for the life of the process). All of the
// batch replays after a crash.
func TestLargeBatchInPieces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.wal().d == nil {
		t.Skip("the file system refuses O_DIRECT")
	}
	defer func() { directWrite = (*os.File).WriteAt }()
	largest := 0
	directWrite = func(f *os.File, b []byte, off int64) (int, error) {
		largest = max(largest, len(b))
		return f.WriteAt(b, off)
	}
	const n, size = 24, 1 << 20
	mustApply(t, s, bigSagas("big", n, size)...)
	if limit := 4<<20 + size + 4*walBlock; largest > limit {
		t.Errorf("largest log write %d bytes, want at most %d", largest, limit)
	}
	if kept := cap(s.wal().abuf); kept > 8<<20 {
		t.Errorf("the log keeps a %d-byte write buffer, want at most 8 MiB", kept)
	}
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		want[fmt.Sprintf("big-%d", i)] = true
	}
	reopenHas(t, s, path, want)
}

// TestCheckpointInChunks: a checkpoint of more than cpChunk bytes of
// states writes them all into bolt (in several bolt transactions), and
// the store reads them back after a clean close and open.
func TestCheckpointInChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 1 << 20 // 40 MB: three chunks
	mustApply(t, s, bigSagas("cp", n, size)...)
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < n; i++ {
		g, bs, err := s.Get(context.Background(), fmt.Sprintf("cp-%d", i))
		if err != nil || len(bs) != 2 || len(g.Payloads[0]) != size || len(bs[1].BinData) != size {
			t.Fatalf("cp-%d after the checkpoint: %v", i, err)
		}
	}
}

// TestApplyWaitsForSlowCheckpoint: while a checkpoint still writes the
// frozen states and the active log has filled up again, Apply waits for
// the checkpoint instead of growing the overlay without bound (issue 30).
func TestApplyWaitsForSlowCheckpoint(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "dtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A checkpoint in progress, as freeze leaves it, and a full log.
	s.mu.Lock()
	s.frozen = map[string]*state{}
	full := s.wal().off
	s.wal().off = walHeader + maxWAL
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), bigSagas("w", 1, 10))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Apply returned (%v) while the checkpoint held the frozen states and the log was full", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The checkpoint ends as checkpointCP ends it.
	s.mu.Lock()
	s.frozen = nil
	s.wal().off = full
	s.cpEnd.Broadcast()
	s.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply still waits after the checkpoint ended")
	}
}
