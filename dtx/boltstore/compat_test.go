package boltstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-db/sluice/dtx"
)

// oldPut writes a transaction the way the store did before the binary
// encoding: a JSON global value, one JSON value per branch in the branch
// bucket, and the index entries.
func oldPut(t *testing.T, tx *bolt.Tx, g *dtx.Global, bs []dtx.Branch) {
	t.Helper()
	v, _ := json.Marshal(g)
	if err := tx.Bucket(bGlobal).Put([]byte(g.Gid), v); err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		v, _ := json.Marshal(&bs[i])
		if err := tx.Bucket(bBranch).Put(bucketKey(g.Gid, i), v); err != nil {
			t.Fatal(err)
		}
	}
	if d, ok := dueAt(g); ok {
		if err := tx.Bucket(bDue).Put(tsKey(d, g.Gid), nil); err != nil {
			t.Fatal(err)
		}
	}
	if g.Finished() {
		if err := tx.Bucket(bFinished).Put(tsKey(g.FinishTime, g.Gid), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// oldRecord is a log record as the store wrote it before the binary
// encoding: the record as JSON.
func oldRecord(epoch uint64, r *record) []byte {
	p, _ := json.Marshal(r)
	var ep [8]byte
	binary.LittleEndian.PutUint64(ep[:], epoch)
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Update(crc32.Checksum(ep[:], crcTable), crcTable, p))
	return append(append(buf, ep[:]...), p...)
}

// TestOldFormatFiles: a store whose bolt file and log were written by the
// JSON versions opens, replays its log on top of the old bolt values, and
// serves Get, Claim, List and Purge.
func TestOldFormatFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	done := saga("old1", dtx.StatusSucceed, "o", now)
	done.NextCronTime, done.FinishTime = time.Time{}, now
	due := saga("old2", dtx.StatusSubmitted, "o", now)
	due4 := saga("old4", dtx.StatusSubmitted, "o", now)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		oldPut(t, tx, done, dtx.GenBranches(done))
		oldPut(t, tx, due, dtx.GenBranches(due))
		oldPut(t, tx, due4, dtx.GenBranches(due4))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The log holds a JSON delta of old2 (over its JSON bolt value), and the
	// creation and a delta of old3, which bolt never saw.
	w, err := openWAL(path + "-wal.0")
	if err != nil {
		t.Fatal(err)
	}
	if w.epoch == 0 {
		t.Fatal("the active log file has no epoch")
	}
	due2 := due.Clone()
	due2.Status, due2.Steps, due2.Payloads = dtx.StatusAborting, nil, nil
	g3 := saga("old3", dtx.StatusSubmitted, "o", now)
	bs3 := dtx.GenBranches(g3)
	g3b := g3.Clone()
	g3b.Owner, g3b.Steps, g3b.Payloads = "o3", nil, nil
	upd := []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusFailed, FinishTime: now}}
	var log []byte
	for _, r := range []*record{{G: due2, Body: true, U: upd}, {G: g3, B: bs3}, {G: g3b, Body: true, U: upd}} {
		log = append(log, oldRecord(w.epoch, r)...)
	}
	if _, err := w.f.WriteAt(log, walHeader); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, bs, err := s.Get(ctx, "old1")
	if err != nil || g.Status != dtx.StatusSucceed || !g.FinishTime.Equal(now) || len(bs) != 2 || bs[1].URL != "http://a/x" {
		t.Errorf("old1: %+v %+v %v", g, bs, err)
	}
	for _, gid := range []string{"old2", "old3"} {
		g, bs, err := s.Get(ctx, gid)
		if err != nil || len(g.Steps) != 1 || g.Steps[0]["compensate"] != "http://a/y" || len(bs) != 2 ||
			bs[0].Status != dtx.StatusPrepared || bs[1].Status != dtx.StatusFailed || !bs[1].FinishTime.Equal(now) {
			t.Errorf("%s: %+v %+v %v", gid, g, bs, err)
		}
	}
	if g, _, _ := s.Get(ctx, "old2"); g == nil || g.Status != dtx.StatusAborting {
		t.Errorf("old2's logged delta not replayed: %+v", g)
	}
	if g, _, _ := s.Get(ctx, "old3"); g == nil || g.Owner != "o3" {
		t.Errorf("old3's logged delta not replayed: %+v", g)
	}
	if l, err := s.List(ctx, "", 10, "", ""); err != nil || len(l) != 4 {
		t.Errorf("list: %+v %v", l, err)
	}
	claimed, err := s.Claim(ctx, "t", now.Add(time.Hour), now.Add(2*time.Hour), 10)
	if err != nil || len(claimed) != 3 || claimed[0].Owner != "t" {
		t.Errorf("claim: %+v %v", claimed, err)
	}
	// old4's row changed in the old layout; its branches are still there.
	if g, bs, err := s.Get(ctx, "old4"); err != nil || g.Owner != "t" || len(bs) != 2 || bs[1].URL != "http://a/x" {
		t.Errorf("old4 after the claim: %+v %+v %v", g, bs, err)
	}
	if n, err := s.Purge(ctx, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Errorf("purge: %d %v", n, err)
	}
	if _, _, err := s.Get(ctx, "old1"); !errors.Is(err, dtx.ErrNotFound) {
		t.Errorf("old1 after the purge: %v", err)
	}
	// The branch bucket keeps only old4's branches: old1 was purged, and
	// the replay wrote old2 as one value.
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bBranch).ForEach(func(k, _ []byte) error {
			if string(k[:5]) != "old4\x00" {
				t.Errorf("branch key %q left in the branch bucket", k)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}
