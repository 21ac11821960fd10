// Package boltstore is the embedded single-node dtx store: one bbolt file
// and a write-ahead log beside it (two files), so `sluice dtx serve` runs
// without a database. An Apply (one group commit of the coordinator) is one
// durable append to the log (O_DIRECT|O_DSYNC, or write and fdatasync)
// before it returns; the new states
// are then served from memory and written into bolt in bulk by
// checkpoints, which run beside Apply and which recovery's once-a-second
// Claim triggers. Open replays the log.
package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
)

var (
	bGlobal   = []byte("global")   // gid -> the transaction (row.go)
	bBranch   = []byte("branch")   // gid 0x00 seq(4) -> Branch, in stores written before one value per transaction
	bDue      = []byte("due")      // due(8) gid -> nil: unfinished, not stuck
	bFinished = []byte("finished") // finish(8) gid -> nil
)

// Store is a dtx.Store in one bbolt file plus its write-ahead log.
type Store struct {
	db *bolt.DB

	// mu orders every write: Apply (log + overlay) and the operations
	// that write bolt directly after a checkpoint (Claim, Purge,
	// ResetLeases); it is not held while a checkpoint writes bolt.
	mu       sync.Mutex
	wals     [2]*wal
	active   int               // index in wals of the file appended to
	overlay  map[string]*state // gid -> state newer than bolt's, durable in the active file
	frozen   map[string]*state // states a running checkpoint is writing into bolt
	closed   bool
	cpKicked bool   // a background checkpoint was started and has not run yet
	recBuf   []byte // Apply's log records, kept for the next Apply

	// cpEnd is signalled (under mu) when a checkpoint has finished with its
	// frozen states, or failed, or the store closed: Apply waits on it
	// while the active log is full and the frozen states not yet in bolt.
	cpEnd *sync.Cond

	cpMu sync.Mutex     // one checkpoint (or direct bolt write) at a time
	bg   sync.WaitGroup // background checkpoints
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true, InitialMmapSize: initialMmap})
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
	// bolt's file lock (held above) also guards the log.
	s := &Store{db: db, overlay: map[string]*state{}}
	s.cpEnd = sync.NewCond(&s.mu)
	for i := range s.wals {
		if s.wals[i], err = openWAL(fmt.Sprintf("%s-wal.%d", path, i)); err != nil {
			s.closeFiles()
			return nil, fmt.Errorf("open dtx store log %s-wal.%d: %w", path, i, err)
		}
	}
	if err := s.replayWAL(); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("open dtx store %s: replay the write-ahead log: %w", path, err)
	}
	return s, nil
}

func (s *Store) closeFiles() error {
	var err error
	for _, w := range s.wals {
		if w != nil {
			if cerr := w.close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close writes the overlay into bolt and closes the files.
func (s *Store) Close() error {
	s.cpMu.Lock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.cpMu.Unlock()
		return nil
	}
	s.mu.Unlock()
	err := s.checkpointCP()
	s.mu.Lock()
	s.closed = true
	s.cpEnd.Broadcast()
	s.mu.Unlock()
	s.cpMu.Unlock()
	s.bg.Wait()
	if cerr := s.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

var errClosed = errors.New("dtx bolt store: closed")

func (s *Store) log(what string, err error) {
	slog.Error("dtx bolt store: "+what+" failed; the write-ahead log keeps the changes", "err", err)
}

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

// Get returns a transaction and its branches.
func (s *Store) Get(ctx context.Context, gid string) (*dtx.Global, []dtx.Branch, error) {
	s.mu.Lock()
	if st, ok := s.latest(gid); ok {
		s.mu.Unlock()
		if st.g == nil {
			return nil, nil, dtx.ErrNotFound
		}
		return st.g.Clone(), append([]dtx.Branch(nil), st.bs...), nil
	}
	s.mu.Unlock()
	var st *state
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		st, err = load(tx, gid)
		return err
	})
	if err == nil && st.g == nil {
		err = dtx.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	return st.g, st.bs, nil
}

// Claim leases due transactions.
// After a checkpoint bolt's due index covers every state older than the
// overlay; a transaction changed since is skipped (its lease or next retry
// time is newer) and looked at again by the next Claim. The bolt write
// holds s.mu, so that Apply never judges a precondition against a row
// that Claim is changing.
func (s *Store) Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*dtx.Global, error) {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if err := s.checkpointCP(); err != nil {
		return nil, err
	}
	due := func(tx *bolt.Tx) []string {
		c := tx.Bucket(bDue).Cursor()
		end := uint64(now.UnixNano())
		var gids []string
		for k, _ := c.First(); k != nil && len(gids) < limit; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[:8]) > end {
				break
			}
			if _, newer := s.overlay[string(k[8:])]; !newer {
				gids = append(gids, string(k[8:]))
			}
		}
		return gids
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	// Most polls find nothing due: look before paying for a bolt commit.
	var any bool
	if err := s.db.View(func(tx *bolt.Tx) error { any = len(due(tx)) > 0; return nil }); err != nil || !any {
		return nil, err
	}
	var out []*dtx.Global
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, gid := range due(tx) {
			cur, err := getRow(tx, gid)
			if err != nil {
				return err
			}
			g := cur.g.Clone()
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
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if err := s.checkpointCP(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		var gids []string
		c := tx.Bucket(bDue).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if _, newer := s.overlay[string(k[8:])]; !newer {
				gids = append(gids, string(k[8:]))
			}
		}
		for _, gid := range gids {
			cur, err := getRow(tx, gid)
			if err != nil {
				return err
			}
			if cur.g.LeaseUntil.IsZero() {
				continue
			}
			g := cur.g.Clone()
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
	if err := s.checkpoint(); err != nil {
		return nil, err
	}
	var out []*dtx.Global
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bGlobal).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			g, err := decodeGlobal(v)
			if err != nil {
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
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if err := s.checkpointCP(); err != nil {
		return 0, err
	}
	expired := func(tx *bolt.Tx) [][]byte {
		c := tx.Bucket(bFinished).Cursor()
		end := uint64(before.UnixNano())
		var fin [][]byte
		for k, _ := c.First(); k != nil && len(fin) < limit; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k[:8]) >= end {
				break
			}
			if _, newer := s.overlay[string(k[8:])]; !newer {
				fin = append(fin, append([]byte(nil), k...))
			}
		}
		return fin
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	var any bool
	if err := s.db.View(func(tx *bolt.Tx) error { any = len(expired(tx)) > 0; return nil }); err != nil || !any {
		return 0, err
	}
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		fin := expired(tx)
		for _, k := range fin {
			if err := deleteRow(tx, string(k[8:]), k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// initialMmap is bolt's first mapping of the file. bolt maps the file
// again whenever it outgrows the mapping (doubling up to 1 GiB), and each
// time copies every node the write transaction touched out of the old
// mapping: in a checkpoint of a growing store that was 40 % of its CPU
// (BenchmarkCheckpoint: 25-35 cpu-us per saga, 15-22 with 1 GiB mapped
// from the start). The mapping is address space, not memory. Windows
// extends the file to the mapping's size, and 32-bit platforms have little
// address space: those keep bolt's default.
var initialMmap = func() int {
	if runtime.GOOS == "windows" || strconv.IntSize < 64 {
		return 0
	}
	return 1 << 30
}()
