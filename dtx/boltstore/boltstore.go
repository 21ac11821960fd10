// Package boltstore is the embedded single-node dtx store: one bbolt file,
// so `sluice dtx serve` runs without a database. Every Apply is one bolt
// transaction, fsync'd before it returns; the coordinator's group commit
// puts many transactions' changes into it.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
)

var (
	bGlobal   = []byte("global")   // gid -> Global JSON
	bBranch   = []byte("branch")   // gid 0x00 seq(4) -> Branch JSON
	bDue      = []byte("due")      // due(8) gid -> nil: unfinished, not stuck
	bFinished = []byte("finished") // finish(8) gid -> nil
)

// Store is a dtx.Store in one bbolt file.
type Store struct {
	db *bolt.DB
}

// Open opens (creating if needed) the store file. Only one process can have
// it open: a second one waits up to 5s and then fails with a hint.
func Open(path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("dtx bolt store: %w", err)
		}
	}
	// The freelist is rebuilt at open instead of written by every commit:
	// fewer pages per fsync, the same durability.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, &sluice.Error{Op: "open dtx store " + path, Err: err, Hint: "another sluice dtx serve has this file open; stop it or use another --store"}
		}
		return nil, fmt.Errorf("open dtx store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bGlobal, bBranch, bDue, bFinished} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open dtx store %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func tsKey(t time.Time, gid string) []byte {
	k := make([]byte, 8, 8+len(gid))
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	return append(k, gid...)
}

// dueAt is when recovery may claim g, or false when it never should.
func dueAt(g *dtx.Global) (time.Time, bool) {
	if g.Finished() || g.Stuck != "" || g.NextCronTime.IsZero() {
		return time.Time{}, false
	}
	if g.LeaseUntil.After(g.NextCronTime) {
		return g.LeaseUntil, true
	}
	return g.NextCronTime, true
}

func getGlobal(tx *bolt.Tx, gid string) (*dtx.Global, error) {
	v := tx.Bucket(bGlobal).Get([]byte(gid))
	if v == nil {
		return nil, dtx.ErrNotFound
	}
	g := &dtx.Global{}
	return g, json.Unmarshal(v, g)
}

// putGlobal writes g and moves its index entries from old's.
func putGlobal(tx *bolt.Tx, old, g *dtx.Global) error {
	if old != nil {
		if t, ok := dueAt(old); ok {
			if err := tx.Bucket(bDue).Delete(tsKey(t, old.Gid)); err != nil {
				return err
			}
		}
		if old.Finished() {
			if err := tx.Bucket(bFinished).Delete(tsKey(old.FinishTime, old.Gid)); err != nil {
				return err
			}
		}
	}
	if t, ok := dueAt(g); ok {
		if err := tx.Bucket(bDue).Put(tsKey(t, g.Gid), nil); err != nil {
			return err
		}
	}
	if g.Finished() {
		if err := tx.Bucket(bFinished).Put(tsKey(g.FinishTime, g.Gid), nil); err != nil {
			return err
		}
	}
	v, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return tx.Bucket(bGlobal).Put([]byte(g.Gid), v)
}

func branchPrefix(gid string) []byte { return append([]byte(gid), 0) }

// branches returns a transaction's branch keys and values in order.
func branches(tx *bolt.Tx, gid string) ([][]byte, []dtx.Branch, error) {
	p := branchPrefix(gid)
	var keys [][]byte
	var out []dtx.Branch
	c := tx.Bucket(bBranch).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		var b dtx.Branch
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, nil, err
		}
		keys = append(keys, append([]byte(nil), k...))
		out = append(out, b)
	}
	return keys, out, nil
}

func putBranch(tx *bolt.Tx, key []byte, b *dtx.Branch) error {
	v, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return tx.Bucket(bBranch).Put(key, v)
}

// Apply applies the batch in one bolt transaction.
func (s *Store) Apply(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	errs := make([]error, len(muts))
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, m := range muts {
			e, err := apply(tx, m)
			if err != nil {
				return err
			}
			errs[i] = e
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dtx bolt store: %w", err)
	}
	return errs, nil
}

// apply returns the mutation's own outcome, or an error that fails the batch.
func apply(tx *bolt.Tx, m *dtx.Mutation) (outcome error, err error) {
	cur, gerr := getGlobal(tx, m.Gid)
	if m.Create {
		if gerr == nil {
			return dtx.ErrExists, nil
		}
		if !errors.Is(gerr, dtx.ErrNotFound) {
			return nil, gerr
		}
		cur = nil
	} else {
		if gerr != nil {
			if errors.Is(gerr, dtx.ErrNotFound) {
				return dtx.ErrNotFound, nil
			}
			return nil, gerr
		}
		if e := m.Check(cur); e != nil {
			return e, nil
		}
	}
	if m.Global != nil {
		if err := putGlobal(tx, cur, m.Global); err != nil {
			return nil, err
		}
	}
	if len(m.NewBranches) == 0 && len(m.BranchUpdates) == 0 {
		return nil, nil
	}
	keys, bs, err := branches(tx, m.Gid)
	if err != nil {
		return nil, err
	}
	for _, u := range m.BranchUpdates {
		for j := range bs {
			if bs[j].BranchID == u.BranchID && bs[j].Op == u.Op {
				bs[j].Status, bs[j].FinishTime = u.Status, u.FinishTime
				if err := putBranch(tx, keys[j], &bs[j]); err != nil {
					return nil, err
				}
			}
		}
	}
	seq := uint32(len(bs))
	now := time.Now().UTC()
next:
	for _, nb := range m.NewBranches {
		for _, b := range bs {
			if b.BranchID == nb.BranchID && b.Op == nb.Op {
				continue next // a retried registerBranch
			}
		}
		k := binary.BigEndian.AppendUint32(branchPrefix(m.Gid), seq)
		seq++
		nb.CreateTime = now
		if err := putBranch(tx, k, &nb); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// Get returns a transaction and its branches.
func (s *Store) Get(ctx context.Context, gid string) (*dtx.Global, []dtx.Branch, error) {
	var g *dtx.Global
	var bs []dtx.Branch
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		if g, err = getGlobal(tx, gid); err != nil {
			return err
		}
		_, bs, err = branches(tx, gid)
		return err
	})
	return g, bs, err
}

// Claim leases due transactions.
func (s *Store) Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*dtx.Global, error) {
	var out []*dtx.Global
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bDue).Cursor()
		end := uint64(now.UnixNano())
		var gids []string
		for k, _ := c.First(); k != nil && len(gids) < limit; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[:8]) > end {
				break
			}
			gids = append(gids, string(k[8:]))
		}
		for _, gid := range gids {
			cur, err := getGlobal(tx, gid)
			if err != nil {
				return err
			}
			g := cur.Clone()
			g.Owner, g.LeaseUntil = token, leaseUntil
			if err := putGlobal(tx, cur, g); err != nil {
				return err
			}
			out = append(out, g)
		}
		return nil
	})
	return out, err
}

// ResetLeases drops every lease: only one process can open the file, so a
// lease found at start-up belonged to a coordinator that is gone.
func (s *Store) ResetLeases(ctx context.Context) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		var gids []string
		c := tx.Bucket(bDue).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			gids = append(gids, string(k[8:]))
		}
		for _, gid := range gids {
			cur, err := getGlobal(tx, gid)
			if err != nil {
				return err
			}
			if cur.LeaseUntil.IsZero() {
				continue
			}
			g := cur.Clone()
			g.LeaseUntil = time.Time{}
			if err := putGlobal(tx, cur, g); err != nil {
				return err
			}
		}
		return nil
	})
}

// List pages through transactions in gid order.
func (s *Store) List(ctx context.Context, after string, limit int, status, transType string) ([]*dtx.Global, error) {
	var out []*dtx.Global
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bGlobal).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			g := &dtx.Global{}
			if err := json.Unmarshal(v, g); err != nil {
				return err
			}
			if (status == "" || g.Status == status) && (transType == "" || g.TransType == transType) {
				out = append(out, g)
			}
		}
		return nil
	})
	return out, err
}

// Purge removes finished transactions that finished before `before`.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bFinished).Cursor()
		end := uint64(before.UnixNano())
		var fin [][]byte
		for k, _ := c.First(); k != nil && len(fin) < limit; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[:8]) >= end {
				break
			}
			fin = append(fin, append([]byte(nil), k...))
		}
		for _, k := range fin {
			gid := string(k[8:])
			keys, _, err := branches(tx, gid)
			if err != nil {
				return err
			}
			for _, bk := range keys {
				if err := tx.Bucket(bBranch).Delete(bk); err != nil {
					return err
				}
			}
			if err := tx.Bucket(bGlobal).Delete([]byte(gid)); err != nil {
				return err
			}
			if err := tx.Bucket(bFinished).Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
