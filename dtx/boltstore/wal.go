package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"time"
)

// wal is the store's write-ahead log, one preallocated file rewritten in
// place. Each record is the whole new state of one transaction (its row and
// all its branches), so replaying the log is a series of idempotent puts.
// One Apply batch is one write and one fdatasync (against two fsyncs and a
// page rewrite per bolt commit), and because the file's blocks exist
// already, that fdatasync flushes data only, with no file-system journal
// commit for a changed length.
//
// Layout: a header block holding the file's epoch, then records
// [len uint32][crc32c uint32][epoch uint64][record], the CRC covering epoch
// and record (codec.go; JSON in files written before the binary encoding).
// The store keeps two such files and appends to one while a checkpoint moves the other's states into bolt. reset (when a file becomes
// the one appended to) gives it a new, larger epoch instead of zeroing it:
// replay reads records while they are intact and carry the header's epoch,
// so older records left behind are never replayed, and a torn record (from
// a batch whose fdatasync never returned, so never acknowledged) ends the
// log. retire (once a checkpoint has its states) writes epoch 0: nothing
// in the file is replayed any more.
type wal struct {
	f     *os.File
	epoch uint64
	off   int64 // where the next record goes
	cap   int64 // preallocated length
	// broken is set when a write or sync failed: the file's content past
	// off is unknown, so the store refuses further writes.
	broken error
}

const (
	walHeader = 4096
	walGrow   = 8 << 20
	walMagic  = 0x53445457 // "SDTW"
	recHeader = 16
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func openWAL(path string) (*wal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &wal{f: f, cap: st.Size(), off: walHeader}
	var h [16]byte
	if n, _ := f.ReadAt(h[:], 0); n == len(h) &&
		binary.LittleEndian.Uint32(h[:4]) == walMagic &&
		crc32.Checksum(h[:12], crcTable) == binary.LittleEndian.Uint32(h[12:]) {
		w.epoch = binary.LittleEndian.Uint64(h[4:12])
	}
	return w, nil
}

// encode appends rec to buf as a record of the current epoch.
func (w *wal) encode(buf []byte, rec *record) ([]byte, error) {
	start := len(buf)
	buf = append(buf, make([]byte, recHeader)...)
	buf = appendRecord(buf, rec)
	h, p := buf[start:start+recHeader], buf[start+recHeader:]
	binary.LittleEndian.PutUint32(h[:4], uint32(len(p)))
	binary.LittleEndian.PutUint64(h[8:], w.epoch)
	binary.LittleEndian.PutUint32(h[4:8], crc32.Update(crc32.Checksum(h[8:], crcTable), crcTable, p))
	return buf, nil
}

// append writes buf after the last record and makes it durable.
func (w *wal) append(buf []byte) error {
	if w.broken != nil {
		return w.broken
	}
	err := w.grow(w.off + int64(len(buf)) + recHeader)
	if err == nil {
		_, err = w.f.WriteAt(buf, w.off)
	}
	if err == nil {
		err = fdatasync(w.f)
	}
	if err != nil {
		w.broken = fmt.Errorf("write-ahead log unusable after a failed write; restart the coordinator: %w", err)
		return err
	}
	w.off += int64(len(buf))
	return nil
}

// grow preallocates the file with written zeros (not a hole, not an
// unwritten extent) up to at least n bytes, so that later writes into it
// change no file-system metadata. The next fdatasync makes it durable; the
// zeros after the last record read as the end of the log.
func (w *wal) grow(n int64) error {
	if n <= w.cap {
		return nil
	}
	target := (n/walGrow + 1) * walGrow
	zero := make([]byte, 1<<20)
	for off := w.cap; off < target; off += int64(len(zero)) {
		if _, err := w.f.WriteAt(zero, off); err != nil {
			return err
		}
	}
	w.cap = target
	return nil
}

// reset starts the file over with epoch, which must be larger than any
// epoch either file had. Its old records are dead (in bolt already).
func (w *wal) reset(epoch uint64) error {
	if w.broken != nil {
		return w.broken
	}
	if err := w.grow(walHeader + walGrow); err != nil {
		return err
	}
	if err := w.setEpoch(epoch); err != nil {
		return err
	}
	w.off = walHeader
	return nil
}

// retire marks every record in the file dead.
func (w *wal) retire() error {
	if w.broken != nil {
		return w.broken
	}
	return w.setEpoch(0)
}

// nextEpoch is a new epoch above after. Epochs come from the clock, so
// that even after a torn header (read as epoch 0) a new epoch matches no
// record left in the file.
func nextEpoch(after uint64) uint64 {
	return max(after+1, uint64(time.Now().UnixNano()))
}

func (w *wal) setEpoch(epoch uint64) error {
	w.epoch = epoch
	var h [16]byte
	binary.LittleEndian.PutUint32(h[:4], walMagic)
	binary.LittleEndian.PutUint64(h[4:12], w.epoch)
	binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(h[:12], crcTable))
	if _, err := w.f.WriteAt(h[:], 0); err != nil {
		return err
	}
	if err := fdatasync(w.f); err != nil {
		w.broken = fmt.Errorf("write-ahead log unusable after a failed sync; restart the coordinator: %w", err)
		return err
	}
	return nil
}

// replay calls fn for each intact record of the current epoch, in order.
func (w *wal) replay(fn func(*record) error) error {
	if w.epoch == 0 {
		return nil // new, retired, or a header torn by a reset or retire: nothing to replay
	}
	off := int64(walHeader)
	var h [recHeader]byte
	for off+recHeader <= w.cap {
		if _, err := w.f.ReadAt(h[:], off); err != nil {
			return err
		}
		n := int64(binary.LittleEndian.Uint32(h[:4]))
		if n == 0 || off+recHeader+n > w.cap || binary.LittleEndian.Uint64(h[8:]) != w.epoch {
			break
		}
		p := make([]byte, n)
		if _, err := w.f.ReadAt(p, off+recHeader); err != nil {
			return err
		}
		if crc32.Update(crc32.Checksum(h[8:], crcTable), crcTable, p) != binary.LittleEndian.Uint32(h[4:8]) {
			break
		}
		rec, err := decodeRecord(p)
		if err != nil {
			break
		}
		if err := fn(rec); err != nil {
			return err
		}
		off += recHeader + n
	}
	w.off = off
	return nil
}

func (w *wal) close() error { return w.f.Close() }
