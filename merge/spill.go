package merge

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluice-db/sluice/internal/private"
)

// A transaction waiting to be merged (read ahead of the merge, or held
// back until the other sources catch up) would be held in memory whole:
// a 2 GB transaction would take 2 GB, per source and per transaction in
// the read-ahead queue. So each source keeps at most Config.SpillAbove
// bytes of waiting transactions in memory; the transaction that would go
// past it is written, event by event, to a temporary file in SpillDir and
// read back, one event at a time, when it is merged. Memory is then
// bounded by sources x SpillAbove plus one event, whatever the size of a
// transaction. The files are private (0600), each removed once its
// transaction is merged, and the directory is emptied when the merge
// starts and stops, so nothing survives a crash for long.

// spillFile is a transaction's events on disk: the raw events one after
// the other (each event's header says its size).
type spillFile struct {
	f *os.File
	w *bufio.Writer
}

func newSpillFile(dir string) (*spillFile, error) {
	f, err := os.CreateTemp(dir, "txn-*")
	if err != nil {
		return nil, fmt.Errorf("merge: spill a large transaction to %s: %w", dir, err)
	}
	if err := f.Chmod(private.FileMode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("merge: spill file: %w", err)
	}
	return &spillFile{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (s *spillFile) write(raw []byte) error {
	if _, err := s.w.Write(raw); err != nil {
		return fmt.Errorf("merge: write spill file %s: %w", s.f.Name(), err)
	}
	return nil
}

// done ends the writing: the events are on disk (in the page cache; the
// file dies with the process, so it needs no fsync) and the write buffer
// is dropped.
func (s *spillFile) done() error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("merge: write spill file %s: %w", s.f.Name(), err)
	}
	s.w = nil
	return nil
}

// each calls fn with every event in the file, in order; buf is reused
// between events (fn must not keep it).
func (s *spillFile) each(buf *[]byte, fn func(raw []byte) error) error {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("merge: read spill file: %w", err)
	}
	r := bufio.NewReaderSize(s.f, 256<<10)
	for {
		hb, err := r.Peek(headerSize)
		if len(hb) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("merge: read spill file %s: %w", s.f.Name(), err)
		}
		h, err := parseHeader(hb)
		if err != nil {
			return fmt.Errorf("merge: spill file %s: %w", s.f.Name(), err)
		}
		if cap(*buf) < int(h.Size) {
			*buf = make([]byte, h.Size)
		}
		raw := (*buf)[:h.Size]
		if _, err := io.ReadFull(r, raw); err != nil {
			return fmt.Errorf("merge: read spill file %s: %w", s.f.Name(), err)
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
}

// remove deletes the file.
func (s *spillFile) remove() {
	if s == nil || s.f == nil {
		return
	}
	s.f.Close()
	os.Remove(s.f.Name())
	s.f = nil
}

// resetSpillDir empties (and makes) the spill directory: files left by a
// process that died are of transactions that will be read again.
func resetSpillDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("merge: empty the spill directory: %w", err)
	}
	if err := os.MkdirAll(dir, private.DirMode); err != nil {
		return fmt.Errorf("merge: make the spill directory: %w", err)
	}
	return nil
}

// add appends an event to the feed's open transaction, spilling it to a
// file when the source's waiting transactions would hold more than
// SpillAbove bytes in memory.
func (m *Merger) add(f *feed, t *txn, raw []byte) error {
	if t.spill == nil && f.mem.Load()+t.mem+int64(len(raw)) > m.cfg.SpillAbove {
		s, err := newSpillFile(m.cfg.SpillDir)
		if err != nil {
			return err
		}
		for _, e := range t.events {
			if err := s.write(e); err != nil {
				s.remove()
				return err
			}
		}
		t.spill, t.events, t.mem = s, nil, 0
		m.spills.Add(1)
	}
	if t.spill != nil {
		return t.spill.write(raw)
	}
	t.events = append(t.events, raw)
	t.mem += int64(len(raw))
	return nil
}

// events calls fn with each event of t, from memory or from its file.
func (m *Merger) eachEvent(t *txn, fn func(raw []byte) error) error {
	if t.spill != nil {
		return t.spill.each(&m.spillBuf, fn)
	}
	for _, raw := range t.events {
		if err := fn(raw); err != nil {
			return err
		}
	}
	return nil
}

// drop forgets a transaction that leaves the merge: its memory no longer
// counts against its source, its file goes.
func (f *feed) drop(t *txn) {
	if t == nil {
		return
	}
	f.mem.Add(-t.mem)
	t.events, t.mem = nil, 0
	t.spill.remove()
	t.spill = nil
}

// cleanup removes the spill files of transactions still waiting when the
// merge stops (the feeders have returned).
func (m *Merger) cleanup() {
	for _, f := range m.feeds {
		f.drop(f.head)
		f.head = nil
		for {
			select {
			case t := <-f.ch:
				f.drop(t)
				continue
			default:
			}
			break
		}
	}
	_ = os.RemoveAll(m.cfg.SpillDir)
}

// spillDirFor is the default spill directory of a merge in dir.
func spillDirFor(dir string) string { return filepath.Join(dir, "merge-spill") }
