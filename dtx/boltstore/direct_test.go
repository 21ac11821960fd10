//go:build linux

package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// reopenHas crashes s, opens the store at path again and checks which
// gids it holds.
func reopenHas(t *testing.T, s *Store, path string, want map[string]bool) {
	t.Helper()
	crash(t, s)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for gid, present := range want {
		_, bs, err := s.Get(context.Background(), gid)
		if present && (err != nil || len(bs) != 2) {
			t.Errorf("%s after the crash: %v %v", gid, bs, err)
		}
		if !present && !errors.Is(err, dtx.ErrNotFound) {
			t.Errorf("%s after the crash: %v, want not found", gid, err)
		}
	}
}

func create(t *testing.T, s *Store, gid string) {
	t.Helper()
	g := saga(gid, dtx.StatusSubmitted, "o", time.Now().UTC())
	mustApply(t, s, &dtx.Mutation{Gid: gid, Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
}

// TestDirectFallback: when the first O_DIRECT write fails with EINVAL (a
// file system that takes the flag at open but not for writes), the log
// goes on with write and fdatasync, and what it wrote replays.
func TestDirectFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.wal().d == nil {
		t.Skip("the file system refuses O_DIRECT at open already")
	}
	defer func() { directWrite = (*os.File).WriteAt }()
	calls := 0
	directWrite = func(*os.File, []byte, int64) (int, error) { calls++; return 0, syscall.EINVAL }
	create(t, s, "a")
	create(t, s, "b")
	if calls != 1 || s.wal().d != nil {
		t.Errorf("%d O_DIRECT writes tried, direct file still in use: %v", calls, s.wal().d != nil)
	}
	reopenHas(t, s, path, map[string]bool{"a": true, "b": true})
}

// TestDirectErrorAfterSuccess: once O_DIRECT writes worked, a failing one
// is a failed commit (nothing acknowledged, the log refuses more writes),
// not a reason to switch paths.
func TestDirectErrorAfterSuccess(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "dtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.wal().d == nil {
		t.Skip("the file system refuses O_DIRECT")
	}
	create(t, s, "a")
	defer func() { directWrite = (*os.File).WriteAt }()
	directWrite = func(*os.File, []byte, int64) (int, error) { return 0, syscall.EINVAL }
	g := saga("b", dtx.StatusSubmitted, "o", time.Now().UTC())
	if _, err := s.Apply(context.Background(), []*dtx.Mutation{{Gid: "b", Create: true, Global: g}}); err == nil {
		t.Fatal("a failed write was acknowledged")
	}
	directWrite = (*os.File).WriteAt
	if _, err := s.Apply(context.Background(), []*dtx.Mutation{{Gid: "c", Create: true, Global: saga("c", dtx.StatusSubmitted, "o", time.Now())}}); err == nil {
		t.Error("the log took a write after a failed one")
	}
}

// TestTmpfsLog: the store works on tmpfs, which refuses O_DIRECT at
// open before Linux 6.6 and takes it since.
func TestTmpfsLog(t *testing.T) {
	var fs syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs("/dev/shm", &fs); err != nil || fs.Type != tmpfsMagic {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "boltstore")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("O_DIRECT on tmpfs: %v", s.wal().d != nil)
	create(t, s, "a")
	reopenHas(t, s, path, map[string]bool{"a": true})
}

// TestTornDirectWrite: a crash tore the last O_DIRECT block write after
// its first sectors (which hold earlier records, rewritten with the same
// bytes, and the start of the last batch). The earlier records of the
// block replay; the torn batch, never acknowledged, ends the log.
func TestTornDirectWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.wal().d == nil {
		t.Log("the file system refuses O_DIRECT: testing the write+fdatasync path")
	}
	// Records until one crosses a sector boundary: that one is torn.
	want := map[string]bool{}
	var start, end int64
	for i := 0; ; i++ {
		gid := fmt.Sprintf("g%d", i)
		start = s.wal().off
		create(t, s, gid)
		end = s.wal().off
		want[gid] = true
		if start/walBlock != end/walBlock {
			t.Fatalf("no record crossed a sector boundary inside the first block (%d..%d)", start, end)
		}
		if (start+recHeader+511)&^511 < end {
			break
		}
	}
	want[fmt.Sprintf("g%d", len(want)-1)] = false
	// The sectors from the first 512-byte boundary inside the last record
	// keep what the block held before: zeros.
	from := (start + recHeader + 511) &^ 511
	if _, err := s.wal().f.WriteAt(make([]byte, walBlock-from%walBlock), from); err != nil {
		t.Fatal(err)
	}
	if len(want) < 2 {
		t.Fatalf("only %d records", len(want))
	}
	reopenHas(t, s, path, want)
}
