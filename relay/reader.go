package relay

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// EventSource is what the decoder consumes: events in source order, each
// with the source position just after it. Position.GTIDSet is the set of
// transactions complete at that position (it changes at commit events).
// Next blocks until an event is available or ctx ends.
type EventSource interface {
	Next(ctx context.Context) (*replication.BinlogEvent, sluice.Position, error)
}

// RawEvent is one event as stored, with the position after it.
type RawEvent struct {
	Data []byte // header, body and checksum; owned by the caller
	Type replication.EventType
	// Timestamp is the source's event time (unix seconds).
	Timestamp uint32
	Pos       sluice.Position
	// Boundary is true when the event ends a transaction (or stands alone):
	// Pos is a point where a consumer may stop and resume.
	Boundary bool

	filler bool // a relay head filler (head.go), skipped by NextRaw
}

// Reader tails the relay from a position: it follows rotations, waits for
// the writer, and only ever returns events of complete transactions. A
// Reader is not safe for concurrent use.
type Reader struct {
	l      *Log
	parser *replication.BinlogParser

	name     string
	f        *os.File
	br       *bufio.Reader
	off      int64
	limit    int64 // cached published size of the current file
	checksum bool
	groups   groupTracker
	gtids    *gtidTracker
	// lean (NewLeanReader): an event's Data is valid only until the next
	// call (read in place from the buffer when it fits), and no GTID set
	// is tracked: positions keep the start's.
	lean bool
	// skipComments (SkipComments): comment events are passed over unread,
	// and Next returns them as skipped, in skippedEv.
	skipComments bool
	skippedEv    replication.BinlogEvent
	skippedHdr   replication.EventHeader
	// clock gets the waits for the writer to publish more (SetClock).
	clock *stagetime.Clock
}

// SkipComments makes Next pass over the events that only comment a
// transaction, which the decoder ignores: MariaDB's Annotate_rows (the
// statement's text, one per statement), MySQL's Rows_query and MariaDB's
// Binlog_checkpoint. Their bytes are skipped in the buffer, neither copied
// nor parsed (four allocations each, a tenth of the decoder's in the
// catch-up benchmark, issue 18), and Next returns such an event with its
// header, no RawData and a nil Event, in a BinlogEvent the reader reuses:
// it is valid until the next call. Positions and transaction boundaries
// are the same as without. NextRaw returns them with nil Data.
func (r *Reader) SkipComments() { r.skipComments = true }

// comment reports whether an event of type t only comments a transaction
// (SkipComments). None of them is read by the group or GTID tracking.
func comment(t replication.EventType) bool {
	switch t {
	case replication.MARIADB_ANNOTATE_ROWS_EVENT, replication.ROWS_QUERY_EVENT, replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
		return true
	}
	return false
}

// SetClock makes the reader account its waits for the writer to publish
// more (wait_input) in c, the clock of the stage that reads.
func (r *Reader) SetClock(c *stagetime.Clock) { r.clock = c }

// NewReader starts reading at start. start.File empty means the first file
// of the relay. start.Pos must be a transaction boundary (an applied
// position is). When start.GTIDSet is empty and start is inside a file, the
// reader scans the file's head to learn the GTID set at start.
// parser may be nil for a default one (flavor set, decimals as
// decimal.Decimal, TIMESTAMP strings in UTC).
func (l *Log) NewReader(start sluice.Position, parser *replication.BinlogParser) (*Reader, error) {
	return l.newReader(start, parser, false)
}

// NewLeanReader is a cheaper reader for a caller that only passes events
// on (sluice serve's dumps, where a copy and a GTID set per event were a
// third of the reader's CPU while a consumer caught up, bench-cdc): an
// event's Data is valid only until the next call, and the reader tracks no
// GTID set (positions keep start's). Needing none, it goes straight to a
// start inside a file once the event there checks out (eventAt), instead
// of reading the file's events from its head, which 50-70 MB into a file
// took half a second before each dump sent its first event (bench-cdc's DT
// p99); without checksums it reads them, leanly.
func (l *Log) NewLeanReader(start sluice.Position) (*Reader, error) {
	return l.newReader(start, nil, true)
}

func (l *Log) newReader(start sluice.Position, parser *replication.BinlogParser, lean bool) (*Reader, error) {
	if parser == nil {
		parser = replication.NewBinlogParser()
		parser.SetFlavor(l.cfg.Flavor)
		parser.SetUseDecimal(true)
		parser.SetTimestampStringLocation(time.UTC)
	}
	gt, err := newGTIDTracker(l.cfg.Flavor, start.GTIDSet)
	if err != nil {
		return nil, err
	}
	r := &Reader{l: l, parser: parser, gtids: gt, lean: lean}
	name := start.File
	if name == "" {
		files := l.Files()
		if len(files) == 0 {
			return nil, errors.New("relay: empty; give a start position")
		}
		name = files[0]
	}
	if _, _, _, ok, _, _ := l.limit(name); !ok {
		return nil, &sluice.Error{Op: "read relay log", Err: fmt.Errorf("%w: relay file %s is not in %s", sluice.ErrBinlogPurged, name, l.cfg.Dir),
			Hint: "the relay no longer holds this position; restart so sluice fetches it from the source again"}
	}
	if start.File != "" {
		if _, before := l.holds(start); before {
			return nil, errBefore(start)
		}
	}
	if err := r.openFile(name); err != nil {
		return nil, err
	}
	if start.Pos > uint32(len(magic)) {
		scan := start.GTIDSet == ""
		target := int64(start.Pos)
		for r.off < target {
			ev, err := r.readRaw(context.Background())
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("relay: seek to %s: %w", start, err)
			}
			if ev.Type != fdeType {
				continue
			}
			if _, err := r.parser.Parse(ev.Data); err != nil {
				r.Close()
				return nil, fmt.Errorf("relay: parse FDE of %s: %w", name, err)
			}
			if target, err = r.unwrap(start); err != nil {
				r.Close()
				return nil, err
			}
			if !scan && r.checksum && target < r.limit && !r.eventAt(target) {
				// Not an event's start: reading on would hand out bytes
				// of the middle of one as events. (A start past the
				// published end is a relay that lost an unsynced tail
				// and fetches it again: the reader waits for it.)
				r.Close()
				return nil, fmt.Errorf("relay: %s is not an event boundary in the relay", start)
			}
			if !scan || lean && r.eventAt(target) {
				// The FDE is all the parser needs; skip straight to start.
				if _, err := r.f.Seek(target, io.SeekStart); err != nil {
					r.Close()
					return nil, fmt.Errorf("relay: %w", err)
				}
				r.br.Reset(r.f)
				r.off = target
				break
			}
		}
		if r.off != target {
			r.Close()
			return nil, fmt.Errorf("relay: %s is not an event boundary in the relay", start)
		}
	}
	return r, nil
}

func (r *Reader) openFile(name string) error {
	if !r.l.hold(r, name) {
		return &sluice.Error{Op: "read relay log", Err: fmt.Errorf("%w: relay file %s is not in %s", sluice.ErrBinlogPurged, name, r.l.cfg.Dir),
			Hint: "the relay no longer holds this position; restart so sluice fetches it from the source again"}
	}
	f, err := os.Open(filepath.Join(r.l.cfg.Dir, name))
	if err != nil {
		r.releaseIfClosed()
		return fmt.Errorf("relay: %w", err)
	}
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(f, head); err != nil || string(head) != string(magic) {
		f.Close()
		r.releaseIfClosed()
		return fmt.Errorf("relay: %s is not a binlog file", name)
	}
	if r.f != nil {
		r.f.Close()
	}
	r.name, r.f, r.off, r.limit = name, f, int64(len(magic)), 0
	if r.br == nil {
		r.br = bufio.NewReaderSize(f, 1<<20)
	} else {
		r.br.Reset(f)
	}
	r.groups = groupTracker{}
	return nil
}

// NextRaw returns the next event without decoding it.
// A filler event at the head of a relay that started mid-file (head.go) is
// skipped: it stands for source bytes the relay never held.
func (r *Reader) NextRaw(ctx context.Context) (RawEvent, error) {
	for {
		ev, err := r.readRaw(ctx)
		if err != nil || !ev.filler {
			return ev, err
		}
	}
}

// Next returns the next event decoded by the reader's parser, with the
// position after it. It implements EventSource.
func (r *Reader) Next(ctx context.Context) (*replication.BinlogEvent, sluice.Position, error) {
	ev, err := r.NextRaw(ctx)
	if err != nil {
		return nil, sluice.Position{}, err
	}
	if ev.Data == nil && r.skipComments && comment(ev.Type) {
		r.skippedHdr = replication.EventHeader{Timestamp: ev.Timestamp, EventType: ev.Type}
		r.skippedEv = replication.BinlogEvent{Header: &r.skippedHdr}
		return &r.skippedEv, ev.Pos, nil
	}
	be, err := r.parser.Parse(ev.Data)
	if err != nil {
		return nil, ev.Pos, fmt.Errorf("relay: decode %s event ending at %s: %w", ev.Type, ev.Pos, err)
	}
	return be, ev.Pos, nil
}

func (r *Reader) readRaw(ctx context.Context) (RawEvent, error) {
	for r.off >= r.limit {
		size, done, next, ok, changed, closed := r.l.limit(r.name)
		if !ok {
			return RawEvent{}, fmt.Errorf("relay: %s was purged while being read", r.name)
		}
		r.limit = size
		if r.off < r.limit {
			break
		}
		if done && next != "" {
			if err := r.openFile(next); err != nil {
				return RawEvent{}, err
			}
			continue
		}
		if closed {
			return RawEvent{}, ErrClosed
		}
		t0 := r.clock.Enter(stagetime.WaitInput)
		err := waitChange(ctx, changed)
		r.clock.Leave(stagetime.WaitInput, t0)
		if err != nil {
			return RawEvent{}, err
		}
	}
	hb, err := r.br.Peek(headerSize)
	if err != nil {
		return RawEvent{}, fmt.Errorf("relay: read %s at %d: %w", r.name, r.off, err)
	}
	h, err := parseHeader(hb)
	if err != nil {
		return RawEvent{}, fmt.Errorf("relay: %s at %d: %w", r.name, r.off, err)
	}
	if r.off+int64(h.Size) > r.limit {
		return RawEvent{}, fmt.Errorf("relay: %s at %d: event of %d bytes crosses the published end %d", r.name, r.off, h.Size, r.limit)
	}
	if h.Type == ignorableType && h.Size >= uint32(minFiller) {
		if p, err := r.br.Peek(headerSize + len(fillerTag)); err == nil && isFiller(h, p) {
			// A filler of the relay's head: pass over it unread.
			if _, err := r.br.Discard(int(h.Size)); err != nil {
				return RawEvent{}, fmt.Errorf("relay: read %s at %d: %w", r.name, r.off, err)
			}
			r.off += int64(h.Size)
			b := r.groups.step(h, nil, r.checksum)
			return RawEvent{Type: h.Type, Timestamp: h.Timestamp, Boundary: b, filler: true,
				Pos: sluice.Position{File: r.name, Pos: uint32(r.off), GTIDSet: r.gtids.text, Flavor: r.l.cfg.Flavor}}, nil
		}
	}
	if r.skipComments && comment(h.Type) {
		// Passed over unread (SkipComments): the trackers read none of it.
		if _, err := r.br.Discard(int(h.Size)); err != nil {
			return RawEvent{}, fmt.Errorf("relay: read %s at %d: %w", r.name, r.off, err)
		}
		r.off += int64(h.Size)
		b := r.groups.step(h, nil, r.checksum)
		if !r.lean {
			r.gtids.onEvent(h, nil, r.checksum, b)
		}
		return RawEvent{Type: h.Type, Timestamp: h.Timestamp, Boundary: b,
			Pos: sluice.Position{File: r.name, Pos: uint32(r.off), GTIDSet: r.gtids.text, Flavor: r.l.cfg.Flavor}}, nil
	}
	var raw []byte
	if r.lean && int(h.Size) <= r.br.Size() {
		// In place: valid until the buffer is next read, by the next call.
		if raw, err = r.br.Peek(int(h.Size)); err == nil {
			_, err = r.br.Discard(len(raw))
		}
	} else {
		raw = make([]byte, h.Size)
		_, err = io.ReadFull(r.br, raw)
	}
	if err != nil {
		return RawEvent{}, fmt.Errorf("relay: read %s at %d: %w", r.name, r.off, err)
	}
	r.off += int64(h.Size)
	if h.Type == fdeType {
		r.checksum = fdeChecksum(raw)
	}
	b := r.groups.step(h, raw, r.checksum)
	if !r.lean {
		r.gtids.onEvent(h, raw, r.checksum, b)
	}
	return RawEvent{Data: raw, Type: h.Type, Timestamp: h.Timestamp, Boundary: b,
		Pos: sluice.Position{File: r.name, Pos: uint32(r.off), GTIDSet: r.gtids.text, Flavor: r.l.cfg.Flavor}}, nil
}

// eventAt reports, without reading the events before it, whether an event
// starts at off in the current file: off is the file's published end, or
// an event there is whole and its CRC32 trailer matches (files with
// checksums only; bytes inside an event pass with odds of 2^-32). A lean
// reader checks a client's start position so (MariaDB checks the event it
// reads there too), instead of reading the file's events from its head.
func (r *Reader) eventAt(off int64) bool {
	if off == r.limit {
		return true
	}
	if !r.checksum || off+headerSize > r.limit {
		return false
	}
	hb := make([]byte, headerSize)
	if _, err := r.f.ReadAt(hb, off); err != nil {
		return false
	}
	h, err := parseHeader(hb)
	if err != nil || h.Size < headerSize+4 || off+int64(h.Size) > r.limit {
		return false
	}
	raw := make([]byte, h.Size)
	if _, err := r.f.ReadAt(raw, off); err != nil {
		return false
	}
	return crc32.ChecksumIEEE(raw[:len(raw)-4]) == binary.LittleEndian.Uint32(raw[len(raw)-4:])
}

// unwrap is the byte offset of start in its file. A position is 32 bits
// (log_pos), and a file past 4 GiB (one huge transaction, TestFilePast4GiB)
// holds several offsets it may name: the one meant is where a whole event
// starts a transaction (or the file's published end), as a position after
// a commit does; inside the huge transaction the events are its rows. None
// or several such offsets is an error, not a guess. In a smaller file the
// offset is the position, checked by the reading that follows.
func (r *Reader) unwrap(start sluice.Position) (int64, error) {
	size, _, _, _, _, _ := r.l.limit(r.name)
	if size <= 1<<32 {
		return int64(start.Pos), nil
	}
	r.limit = size
	var found []int64
	for off := int64(start.Pos); off <= size; off += 1 << 32 {
		if (r.eventAt(off) || !r.checksum && r.logPosFits(off)) && r.startsGroup(off) {
			found = append(found, off)
		}
	}
	if len(found) != 1 {
		return 0, &sluice.Error{Op: "read relay log", Err: fmt.Errorf("relay: %s is past 4 GiB, and %s names %d transaction boundaries in it (offsets %v)", r.name, start, len(found), found),
			Hint: "restart the task from a GTID position (incremental.gtid-set) after the huge transaction"}
	}
	return found[0], nil
}

// logPosFits reports, for a file without checksums, whether an event
// header at off names its own end as log_pos (modulo 2^32) and fits in
// the published file.
func (r *Reader) logPosFits(off int64) bool {
	if off == r.limit {
		return true
	}
	hb := make([]byte, headerSize)
	if _, err := r.f.ReadAt(hb, off); err != nil {
		return false
	}
	h, err := parseHeader(hb)
	return err == nil && h.Size >= headerSize && off+int64(h.Size) <= r.limit && h.LogPos == uint32(off+int64(h.Size))
}

// startsGroup reports whether the event at off (whole, eventAt) may begin
// a transaction or stand between two: not a row, table map, XID or XA
// PREPARE event (the last event of a prepared XA group, as XID ends a
// committed one), which only occur inside one.
func (r *Reader) startsGroup(off int64) bool {
	if off == r.limit {
		return true
	}
	hb := make([]byte, headerSize)
	if _, err := r.f.ReadAt(hb, off); err != nil {
		return false
	}
	switch hb[4] { // the event type
	case byte(replication.TABLE_MAP_EVENT), byte(replication.XID_EVENT), byte(replication.MARIADB_ANNOTATE_ROWS_EVENT),
		byte(replication.WRITE_ROWS_EVENTv0), byte(replication.UPDATE_ROWS_EVENTv0), byte(replication.DELETE_ROWS_EVENTv0),
		byte(replication.WRITE_ROWS_EVENTv1), byte(replication.UPDATE_ROWS_EVENTv1), byte(replication.DELETE_ROWS_EVENTv1),
		byte(replication.WRITE_ROWS_EVENTv2), byte(replication.UPDATE_ROWS_EVENTv2), byte(replication.DELETE_ROWS_EVENTv2),
		byte(replication.PARTIAL_UPDATE_ROWS_EVENT), byte(replication.ROWS_QUERY_EVENT), byte(replication.XA_PREPARE_LOG_EVENT),
		byte(replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1), byte(replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1),
		byte(replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1):
		return false
	}
	return true
}

// Position is the position after the last event returned.
func (r *Reader) Position() sluice.Position {
	return sluice.Position{File: r.name, Pos: uint32(r.off), GTIDSet: r.gtids.text, Flavor: r.l.cfg.Flavor}
}

// Offset is the byte offset in the current file after the last event
// returned. Position's 32 bits wrap past 4 GiB, as the source's log_pos
// does; the offset does not.
func (r *Reader) Offset() int64 { return r.off }

// Close releases the open file.
func (r *Reader) Close() error {
	r.l.release(r)
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// releaseIfClosed drops the hold of a reader whose first file failed to
// open (it has no file, and its caller gets an error, not a Reader).
func (r *Reader) releaseIfClosed() {
	if r.f == nil {
		r.l.release(r)
	}
}
