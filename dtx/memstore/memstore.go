// Package memstore is a dtx.Store in memory, for unit tests and for trying
// the coordinator out (`sluice dtx serve --store mem://`), like raft's
// inmem_store. Nothing survives the process: never use it where a crash
// must not lose a transaction.
package memstore

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// Store keeps transactions, branches and key-value entries in maps.
type Store struct {
	mu       sync.Mutex
	globals  map[string]*dtx.Global
	branches map[string][]dtx.Branch
	kv       map[string]dtx.KV // cat 0x00 key
	kvSeq    uint64
	closed   bool
}

// New returns an empty store.
func New() *Store {
	return &Store{globals: map[string]*dtx.Global{}, branches: map[string][]dtx.Branch{}, kv: map[string]dtx.KV{}}
}

var errClosed = errors.New("dtx memory store: closed")

// Apply implements dtx.Store.
func (s *Store) Apply(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	errs := make([]error, len(muts))
	for i, m := range muts {
		cur := s.globals[m.Gid]
		if m.Create {
			if cur != nil {
				errs[i] = dtx.ErrExists
				continue
			}
			s.globals[m.Gid] = m.Global.Clone()
			s.branches[m.Gid] = append([]dtx.Branch(nil), m.NewBranches...)
			continue
		}
		if cur == nil {
			errs[i] = dtx.ErrNotFound
			continue
		}
		if errs[i] = m.Check(cur); errs[i] != nil {
			continue
		}
		if m.Global != nil {
			s.globals[m.Gid] = m.Global.Clone()
		}
		bs := append(s.branches[m.Gid], m.NewBranches...)
		for _, u := range m.BranchUpdates {
			for j := range bs {
				if bs[j].BranchID == u.BranchID && bs[j].Op == u.Op {
					bs[j].Status, bs[j].FinishTime = u.Status, u.FinishTime
				}
			}
		}
		s.branches[m.Gid] = bs
	}
	return errs, nil
}

// Get implements dtx.Store.
func (s *Store) Get(ctx context.Context, gid string) (*dtx.Global, []dtx.Branch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.globals[gid]
	if g == nil {
		return nil, nil, dtx.ErrNotFound
	}
	bs := append([]dtx.Branch(nil), s.branches[gid]...)
	g = g.Clone()
	g.OverlayStatus(bs)
	return g, bs, nil
}

// Claim implements dtx.Store.
func (s *Store) Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*dtx.Global, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	var due []*dtx.Global
	for _, g := range s.globals {
		if !g.Finished() && g.Stuck == "" && !g.NextCronTime.IsZero() && !g.NextCronTime.After(now) && !g.LeaseUntil.After(now) {
			due = append(due, g)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].NextCronTime.Before(due[j].NextCronTime) })
	if len(due) > limit {
		due = due[:limit]
	}
	out := make([]*dtx.Global, len(due))
	for i, g := range due {
		g.Owner, g.LeaseUntil = token, leaseUntil
		out[i] = g.Clone()
	}
	return out, nil
}

// List implements dtx.Store.
func (s *Store) List(ctx context.Context, after string, limit int, status, transType string) ([]*dtx.Global, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*dtx.Global
	for gid, g := range s.globals {
		if gid > after && (status == "" || g.Status == status) && (transType == "" || g.TransType == transType) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Gid < out[j].Gid })
	if len(out) > limit {
		out = out[:limit]
	}
	for i, g := range out {
		out[i] = g.Clone()
	}
	return out, nil
}

// Purge implements dtx.Store.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for gid, g := range s.globals {
		if n == limit {
			break
		}
		if g.Finished() && g.FinishTime.Before(before) {
			delete(s.globals, gid)
			delete(s.branches, gid)
			n++
		}
	}
	return n, nil
}

// Close implements dtx.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func kvKey(cat, key string) string { return cat + "\x00" + key }

// KVGet implements dtx.KVStore.
func (s *Store) KVGet(ctx context.Context, cat, key string) (*dtx.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv, ok := s.kv[kvKey(cat, key)]
	if !ok {
		return nil, dtx.ErrNotFound
	}
	return &kv, nil
}

// KVList implements dtx.KVStore.
func (s *Store) KVList(ctx context.Context, cat, after string, limit int) ([]dtx.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []dtx.KV{}
	for k, kv := range s.kv {
		if (cat == "" || strings.HasPrefix(k, cat+"\x00")) && kv.K > after {
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// KVPut implements dtx.KVStore.
func (s *Store) KVPut(ctx context.Context, kv *dtx.KV, version uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.kv[kvKey(kv.Cat, kv.K)]
	now := time.Now().UTC()
	switch {
	case version == 0 && ok:
		return dtx.ErrExists
	case version == 0:
		s.kvSeq++
		kv.ID, kv.CreateTime = s.kvSeq, &now
	case !ok || cur.Version != version:
		return dtx.ErrConflict
	default:
		kv.ID, kv.CreateTime = cur.ID, cur.CreateTime
	}
	kv.Version, kv.UpdateTime = version+1, &now
	s.kv[kvKey(kv.Cat, kv.K)] = *kv
	return nil
}

// KVDelete implements dtx.KVStore.
func (s *Store) KVDelete(ctx context.Context, cat, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.kv[kvKey(cat, key)]; !ok {
		return dtx.ErrNotFound
	}
	delete(s.kv, kvKey(cat, key))
	return nil
}

var (
	_ dtx.Store   = (*Store)(nil)
	_ dtx.KVStore = (*Store)(nil)
)
