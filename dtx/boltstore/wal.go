package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// wal is the store's write-ahead log, one preallocated file rewritten in
// place. Each record is the whole new state of one transaction (its row and
// all its branches), so replaying the log is a series of idempotent puts.
// One Apply batch is one O_DIRECT|O_DSYNC write (or, where the file system
// refuses O_DIRECT, one write and one fdatasync), against two fsyncs and a
// page rewrite per bolt commit; because the file's blocks exist already,
// the sync flushes data only, with no file-system journal commit for a
// changed length.
//
// Layout: a header block holding the file's epoch, then records
// [len uint32][crc32c uint32][epoch uint64][record], the CRC covering epoch
// and record (codec.go; JSON in files written before the binary encoding).
// The store keeps two such files and appends to one while a checkpoint
// moves the other's states into bolt. reset (when a file becomes
// the one appended to) gives it a new, larger epoch instead of zeroing it:
// replay reads records while they are intact and carry the header's epoch,
// so older records left behind are never replayed, and a torn record (from
// a batch whose write never returned, so never acknowledged) ends the
// log. retire (once a checkpoint has its states) writes epoch 0: nothing
// in the file is replayed any more.
type wal struct {
	f *os.File
	// d, when the file system takes it, is the same file opened for
	// O_DIRECT|O_DSYNC record writes (see appendDirect); reads, the header
	// and grow go through f. directOK: a direct write succeeded, so a later
	// EINVAL is an error, not a file system without O_DIRECT.
	d        *os.File
	directOK bool
	// tail holds the log's bytes from the start of the 4096-byte block
	// holding off up to off, when d is set: the next write starts there.
	tail []byte
	abuf []byte // 4096-aligned write buffer for d
	path string

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
	walBlock  = 4096 // O_DIRECT's alignment of offsets, lengths and memory
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// noDirect turns O_DIRECT off, and directWrite is the O_DIRECT write, for
// tests and benchmarks of the other path.
var (
	noDirect    = false
	directWrite = (*os.File).WriteAt
)

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
	w := &wal{f: f, cap: st.Size(), off: walHeader, path: path}
	if d, err := openDirect(path); err == nil && !noDirect {
		w.d = d
	} else if err == nil {
		_ = d.Close()
	}
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
	if err == nil && w.d != nil {
		err = w.appendDirect(buf)
		if err != nil && !w.directOK && errors.Is(err, syscall.EINVAL) {
			// O_DIRECT was accepted at open but not for writes (alignment
			// or a file system that only pretends): nothing was written.
			slog.Info("dtx bolt store: the file system refuses O_DIRECT writes; the log uses write and fdatasync", "path", w.path, "err", err)
			_ = w.d.Close()
			w.d, w.tail, w.abuf, err = nil, nil, nil, nil
		} else if err == nil {
			w.directOK = true
			w.off += int64(len(buf))
			return nil
		}
	}
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

// appendDirect writes buf at off through d, from the start of off's
// block: O_DIRECT writes whole aligned blocks, so the records already in
// that block (kept in tail) are written again with them. Rewriting them is
// safe, as in InnoDB's redo log: the bytes are identical to what the block
// holds, and a device writes a sector whole or not at all, so however a
// crash tears this write, every sector before off reads the same as before
// it; the sectors after off hold either the old bytes (records of no
// current epoch, or zeros) or this batch's, and a batch torn there was
// never acknowledged and fails its CRC, ending the log. The rest of the
// last block is written as zeros: nothing past off is live.
func (w *wal) appendDirect(buf []byte) error {
	start := w.off &^ (walBlock - 1)
	head := int(w.off - start)
	if len(w.tail) != head { // after a replay that ended mid-block
		w.tail = make([]byte, head)
		if _, err := w.f.ReadAt(w.tail, start); err != nil {
			w.tail = nil
			return err
		}
	}
	total := (head + len(buf) + walBlock - 1) &^ (walBlock - 1)
	if len(w.abuf) < total {
		w.abuf = alignedBlock(total + total/2)
	}
	b := w.abuf[:total]
	copy(b, w.tail)
	copy(b[head:], buf)
	clear(b[head+len(buf):])
	_, err := directWrite(w.d, b, start)
	end := head + len(buf)
	if err == nil {
		w.tail = append(w.tail[:0], b[end&^(walBlock-1):end]...)
	}
	if len(w.abuf) > maxKeptBlock {
		// A batch of large transactions: its buffer is not kept for the
		// next, or one flood of 1 MB submits pinned 1.5 times its
		// largest batch (95 MB) for the life of the process (issue 30).
		w.abuf = nil
	}
	return err
}

// maxKeptBlock bounds the write buffer the log keeps between batches.
const maxKeptBlock = 8 << 20

// alignedBlock returns n bytes (rounded up to blocks) at a 4096-aligned address.
func alignedBlock(n int) []byte {
	n = (n + walBlock - 1) &^ (walBlock - 1)
	b := make([]byte, n+walBlock)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (walBlock - 1))
	return b[skip : skip+n : skip+n]
}

// grow preallocates the file with written zeros (not a hole, not an
// unwritten extent) up to at least n bytes, so that later writes into it
// change no file-system metadata. It is made durable here, before any
// record goes there (an O_DIRECT|O_DSYNC write would otherwise have to
// commit the new extents itself); the zeros after the last record read as
// the end of the log.
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
	if err := fdatasync(w.f); err != nil {
		return err
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
	w.off, w.tail = walHeader, w.tail[:0]
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
	w.off, w.tail = off, nil
	return nil
}

func (w *wal) close() error {
	if w.d != nil {
		_ = w.d.Close()
	}
	return w.f.Close()
}
