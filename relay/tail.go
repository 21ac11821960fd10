package relay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/private"
)

// Open must truncate a torn tail of the last relay file back to its last
// transaction boundary. Finding that boundary from the start of the file
// read the whole file at every start (12 % of sluice's CPU in the catch-up
// benchmark, issue 18). So after each fsync of relay data the writer records
// a boundary it has just made durable in a small mark file, and Open scans
// only from there.
//
// The mark holds the file's name, the boundary offset B, whether the file's
// events carry checksums, and a CRC32 of the file's bytes just before B;
// the record ends with a CRC32 of itself. It is written after the data's
// fsync and is not fsynced itself: any version of it that survives a crash
// names a boundary that was durable when it was written. Open uses it only
// when everything checks out: the record's CRC, the name of the last file,
// B within the file, the file's magic and format description event agreeing
// on checksums, the bytes before B matching their CRC, and an event header
// at B when the file goes on past it. Anything else (no mark, a torn or
// stale one, another file's) falls back to the scan from the start.
//
// Why the result is the same as the full scan's: the bytes before B are
// those the writer wrote, event after event from offset 4, so the full scan
// parses an event starting at B; B is a boundary, where the group tracker's
// state is always its zero value; and the only format description event in
// a relay file is the one at offset 4 (the writer drops resent ones). The
// scan from B therefore sees the same events in the same state as the full
// scan does past B, and the last boundary it finds is the full scan's.

// MarkName is the mark file inside the relay directory.
const MarkName = "relay.tail"

const (
	markMagic  = "sluice-relay-tail-1\n"
	markWindow = 4096 // bytes before the boundary covered by the mark's CRC
)

// tailMark is a durable boundary of one relay file.
type tailMark struct {
	name     string
	off      int64  // a transaction boundary; every byte before it was fsynced
	checksum bool   // events carry CRC32 trailers (the file's FDE says so)
	window   uint32 // CRC32 of the file's bytes [off-min(off, markWindow), off)
}

func (m tailMark) encode() []byte {
	b := make([]byte, 0, len(markMagic)+8+1+4+2+len(m.name)+4)
	b = append(b, markMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.off))
	cs := byte(0)
	if m.checksum {
		cs = 1
	}
	b = append(b, cs)
	b = binary.LittleEndian.AppendUint32(b, m.window)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.name)))
	b = append(b, m.name...)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeMark parses a mark; trailing bytes (a longer earlier record) are
// ignored.
func decodeMark(b []byte) (tailMark, bool) {
	const fixed = len(markMagic) + 8 + 1 + 4 + 2
	if len(b) < fixed+4 || string(b[:len(markMagic)]) != markMagic {
		return tailMark{}, false
	}
	p := b[len(markMagic):]
	m := tailMark{off: int64(binary.LittleEndian.Uint64(p)), checksum: p[8] == 1, window: binary.LittleEndian.Uint32(p[9:])}
	n := int(binary.LittleEndian.Uint16(p[13:]))
	if p[8] > 1 || len(b) < fixed+n+4 {
		return tailMark{}, false
	}
	m.name = string(b[fixed : fixed+n])
	if crc32.ChecksumIEEE(b[:fixed+n]) != binary.LittleEndian.Uint32(b[fixed+n:]) || m.off < 0 {
		return tailMark{}, false
	}
	return m, true
}

func readMark(dir string) (tailMark, bool) {
	b, err := os.ReadFile(filepath.Join(dir, MarkName))
	if err != nil {
		return tailMark{}, false
	}
	return decodeMark(b)
}

// windowCRC is the CRC32 of the markWindow bytes (fewer at the file's
// start) before off.
func windowCRC(f io.ReaderAt, off int64) (uint32, error) {
	n := min(off, markWindow)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off-n); err != nil {
		return 0, err
	}
	return crc32.ChecksumIEEE(buf), nil
}

// tailFile is what recovery needs of a relay file (an *os.File).
type tailFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
}

// recoverTail truncates the relay file name in dir after its last complete
// transaction and returns the resulting size. It scans from the mark when
// the mark is valid for the file, else from the start.
func recoverTail(dir, name string) (int64, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("relay: recover: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("relay: recover: %w", err)
	}
	m, ok := readMark(dir)
	good, err := recoverFile(f, st.Size(), m, ok && m.name == name)
	if err != nil {
		return 0, fmt.Errorf("relay: recover %s: %w", path, err)
	}
	return good, nil
}

// recoverFile is recoverTail on an open file of size bytes; useMark says m
// names this file.
func recoverFile(f tailFile, size int64, m tailMark, useMark bool) (int64, error) {
	from, checksum, ok := int64(0), false, false
	if useMark {
		from, checksum, ok = markStart(f, size, m)
	}
	var good int64
	if ok {
		var err error
		if good, err = scanBoundaries(f, size, from, checksum); err != nil {
			return 0, err
		}
	} else {
		head := make([]byte, len(magic))
		if _, err := f.ReadAt(head, 0); err == nil && bytes.Equal(head, magic) {
			var err error
			if good, err = scanBoundaries(f, size, int64(len(magic)), false); err != nil {
				return 0, err
			}
		}
	}
	if good < int64(len(magic)) {
		if err := f.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := f.WriteAt(magic, 0); err != nil {
			return 0, err
		}
		good = int64(len(magic))
	} else if good < size {
		if err := f.Truncate(good); err != nil {
			return 0, err
		}
	}
	return good, f.Sync()
}

// markStart validates m against the file and returns where to scan from and
// the checksum setting there.
func markStart(f io.ReaderAt, size int64, m tailMark) (from int64, checksum, ok bool) {
	if m.off <= int64(len(magic)) || m.off > size {
		return 0, false, false
	}
	head := make([]byte, len(magic)+headerSize)
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head[:len(magic)], magic) {
		return 0, false, false
	}
	h, err := parseHeader(head[len(magic):])
	if err != nil || h.Type != fdeType || int64(len(magic))+int64(h.Size) > m.off {
		return 0, false, false
	}
	fde := make([]byte, h.Size)
	if _, err := f.ReadAt(fde, int64(len(magic))); err != nil || fdeChecksum(fde) != m.checksum {
		return 0, false, false
	}
	if c, err := windowCRC(f, m.off); err != nil || c != m.window {
		return 0, false, false
	}
	if size-m.off >= headerSize {
		hb := make([]byte, headerSize)
		if _, err := f.ReadAt(hb, m.off); err != nil {
			return 0, false, false
		}
		if _, err := parseHeader(hb); err != nil {
			return 0, false, false
		}
	}
	return m.off, m.checksum, true
}

// scanBoundaries reads whole events from offset from (a boundary, or 4) to
// size and returns the offset after the last complete transaction. checksum
// is the setting in force at from; a format description event changes it.
// An event that does not fit before size, or a malformed header, ends the
// scan: a torn tail.
func scanBoundaries(f io.ReaderAt, size, from int64, checksum bool) (int64, error) {
	good, off := from, from
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, size-from), 1<<20)
	var groups groupTracker
	var raw []byte
	for {
		hb, err := r.Peek(headerSize)
		if len(hb) < headerSize {
			if err != nil && err != io.EOF {
				return 0, err
			}
			return good, nil // end of file, or a torn header
		}
		h, err := parseHeader(hb)
		if err != nil || int64(h.Size) > size-off {
			return good, nil // malformed, or torn inside the event
		}
		switch h.Type {
		case fdeType, replication.MARIADB_GTID_EVENT, replication.QUERY_EVENT:
			// The events whose bodies the group tracker (or the checksum
			// setting) needs.
			if cap(raw) < int(h.Size) {
				raw = make([]byte, h.Size)
			}
			raw = raw[:h.Size]
			if _, err := io.ReadFull(r, raw); err != nil {
				return torn(good, err)
			}
		default:
			raw = raw[:0]
			if _, err := r.Discard(int(h.Size)); err != nil {
				return torn(good, err)
			}
		}
		off += int64(h.Size)
		if h.Type == fdeType {
			checksum = fdeChecksum(raw)
		}
		if groups.step(h, raw, checksum) {
			good = off
		}
	}
}

// torn: the file ended inside an event (it shrank under us) is a torn
// tail like any other; other read errors are errors.
func torn(good int64, err error) (int64, error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return good, nil
	}
	return 0, err
}

// markTail records that the current file is durable up to boundary: called
// after an fsync covering it. The mark only saves work at the next Open, so
// a failure to write it is not the relay's failure: Open checks whatever
// mark it finds and scans from the start when it does not hold.
func (w *Writer) markTail(boundary int64) {
	w.markTailOf(w.f, w.name, w.checksum, boundary)
}

// markTailOf is markTail for file f, named name, whose events carry
// checksums or not (the background fsync's copy of the writer's state).
func (w *Writer) markTailOf(f io.ReaderAt, name string, checksum bool, boundary int64) {
	if boundary <= int64(len(magic)) {
		return
	}
	c, err := windowCRC(f, boundary)
	if err != nil {
		return
	}
	if w.mark == nil {
		if w.mark, err = os.OpenFile(filepath.Join(w.l.cfg.Dir, MarkName), os.O_RDWR|os.O_CREATE, private.FileMode); err != nil {
			w.mark = nil
			return
		}
	}
	rec := tailMark{name: name, off: boundary, checksum: checksum, window: c}.encode()
	_, _ = w.mark.WriteAt(rec, 0)
}

// dropMark empties the mark before a file is created (it may reuse the
// marked file's name, after Reset): until the next fsync, Open scans the
// new file from the start. A mark that could not be emptied still names a
// boundary of the old file's bytes, which the CRC before it tells apart.
func (w *Writer) dropMark() {
	if w.mark != nil {
		_ = w.mark.Truncate(0)
		return
	}
	_ = os.Truncate(filepath.Join(w.l.cfg.Dir, MarkName), 0)
}
