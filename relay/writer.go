package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/private"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// Writer appends a source's binlog stream to the relay. It is fed every
// event the source sends (including the artificial rotate, format
// description and heartbeat events of the replication protocol) and keeps
// the files byte-identical to the source's. One Writer per Log at a time;
// its methods are not safe for concurrent use.
type Writer struct {
	l *Log

	name     string
	f        *os.File
	bw       *bufio.Writer
	size     int64 // bytes written to the current file, buffered or not
	boundary int64 // size after the last complete transaction
	checksum bool
	groups   groupTracker

	// A new relay that starts inside a source file (head.go): the start
	// offset and the GTID set there, until the file's head is written.
	fillTo   int64
	fillGTID string

	unflushed int
	lastFlush time.Time
	lastSync  time.Time
	dirty     bool // written but not fsynced
	// syncing: the interval policy's fsync in progress, in the background
	// (syncInBackground); nil when none. Its result comes once.
	syncing chan error

	mark *os.File // the tail mark (tail.go), opened at the first fsync

	mu        sync.Mutex
	sourcePos sluice.Position // newest position the source reported (events or heartbeats)
	sourceAt  time.Time
	lastTS    uint32 // source timestamp of the newest event
	events    uint64

	clock *stagetime.Clock // SetClock; nil: untimed
}

// SetClock makes Run account its time in c (the relay_write stage):
// waiting for the next event from the source (wait_input) and flushing
// (flush: the write to the file, an fsync under relay-sync commit, the
// publish to readers). Call it before Run.
func (w *Writer) SetClock(c *stagetime.Clock) { w.clock = c }

// NewWriter opens the writer. Resume is where to ask the source to start.
func (l *Log) NewWriter() (*Writer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writer {
		return nil, errors.New("relay: a writer is already open")
	}
	if l.closed {
		return nil, ErrClosed
	}
	l.writer = true
	return &Writer{l: l, lastFlush: time.Now(), lastSync: time.Now()}, nil
}

// Resume is the position to request from the source so the stream continues
// the relay exactly: the end of the relay, or start when the relay is empty.
// A relay that starts inside a file keeps the source's offsets (head.go).
// A MySQL start without a GTID set is copied from offset 4 instead, since
// the GTID list at the head of the file could not be written truthfully.
func (w *Writer) Resume(start sluice.Position) sluice.Position {
	if end := w.l.End(); end.File != "" {
		return end
	}
	if start.Pos > uint32(len(magic)) && (w.l.cfg.Flavor != "mysql" || start.GTIDSet != "") {
		w.fillTo, w.fillGTID = int64(start.Pos), start.GTIDSet
		return sluice.Position{File: start.File, Pos: start.Pos, GTIDSet: start.GTIDSet, Flavor: start.Flavor}
	}
	w.fillTo = 0
	return sluice.Position{File: start.File, Pos: 4, Flavor: start.Flavor}
}

// Write stores one event received from the source.
func (w *Writer) Write(ev *replication.BinlogEvent) error {
	raw := ev.RawData
	h, err := parseHeader(raw)
	if err != nil {
		return err
	}
	switch h.Type {
	case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
		w.noteSource(string(heartbeatFile(raw, w.checksum)), h.LogPos, 0)
		return nil
	case replication.ROTATE_EVENT:
		re, ok := ev.Event.(*replication.RotateEvent)
		if !ok {
			return fmt.Errorf("relay: rotate event not decoded")
		}
		if h.Artificial() || h.Timestamp == 0 || h.LogPos == 0 {
			return w.switchTo(string(re.NextLogName), int64(re.Position))
		}
	case replication.FORMAT_DESCRIPTION_EVENT:
		if w.f == nil {
			return errors.New("relay: format description event before any rotate event")
		}
		w.checksum = fdeChecksum(raw)
		if w.size > int64(len(magic)) {
			return nil // resent at the start of a dump; the file already has it
		}
		if h.LogPos == 0 {
			raw = append([]byte(nil), raw...)
			setLogPos(raw, uint32(w.size)+h.Size, w.checksum)
		}
	default:
		if h.Artificial() {
			return nil // e.g. MariaDB's fake Gtid_list at a GTID start
		}
	}
	if w.f == nil {
		return fmt.Errorf("relay: %s event before any rotate event", h.Type)
	}
	// log_pos is 32 bits: in a file past 4 GiB (one transaction larger
	// than the room left under max_binlog_size, e.g. a 2 GB bulk insert
	// whose Annotate_rows events repeat every row's value) the server
	// writes it modulo 2^32. The event continues the relay when it ends
	// where the relay's offset plus its size does, modulo 2^32 too; the
	// relay's own offsets stay 64-bit.
	if h.LogPos != 0 && h.LogPos-h.Size != uint32(w.size) {
		return fmt.Errorf("relay: %s ending at %s:%d (log_pos, modulo 2^32) does not continue the relay at offset %d (gap or overlap)", h.Type, w.name, h.LogPos, w.size)
	}
	if _, err := w.bw.Write(raw); err != nil {
		return fmt.Errorf("relay: write %s: %w", w.name, err)
	}
	w.size += int64(len(raw))
	w.unflushed += len(raw)
	w.dirty = true
	if w.groups.step(h, raw, w.checksum) {
		w.boundary = w.size
	}
	if h.Type == fdeType && w.fillTo > w.size {
		if err := w.writeHead(h); err != nil {
			return err
		}
	}
	w.noteSource(w.name, uint32(w.size), h.Timestamp)
	if h.Type == replication.ROTATE_EVENT {
		// The real rotate ends the file; the server follows it with an
		// artificial rotate that opens the next one.
		return w.finishFile()
	}
	return nil
}

func (w *Writer) noteSource(file string, pos uint32, ts uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if file != "" {
		w.sourcePos = sluice.Position{File: file, Pos: pos, Flavor: w.l.cfg.Flavor}
	}
	w.sourceAt = time.Now()
	if ts != 0 {
		w.lastTS = ts
		w.events++
	}
}

// SourceStatus is what the writer last heard from the source: its position
// (from events and heartbeats), when, the newest event timestamp and the
// number of events stored.
func (w *Writer) SourceStatus() (pos sluice.Position, at time.Time, lastTS uint32, events uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sourcePos, w.sourceAt, w.lastTS, w.events
}

// heartbeatFile is the binlog file name a heartbeat carries.
func heartbeatFile(raw []byte, checksum bool) []byte {
	body := raw[headerSize:]
	if checksum && len(body) >= 4 {
		body = body[:len(body)-4]
	}
	return body
}

// switchTo handles an artificial rotate: continue the current file, or
// finish it and open name.
func (w *Writer) switchTo(name string, pos int64) error {
	if name == "" {
		return errors.New("relay: rotate to an empty file name")
	}
	if w.f != nil && w.name == name {
		if pos != w.size && pos != int64(len(magic)) && (pos != w.fillTo || w.size != int64(len(magic))) {
			return fmt.Errorf("relay: source resumes %s at %d but the relay holds %d bytes", name, pos, w.size)
		}
		return nil
	}
	if w.f != nil {
		if err := w.finishFile(); err != nil {
			return err
		}
	}
	files := w.l.Files()
	path := filepath.Join(w.l.cfg.Dir, name)
	if len(files) > 0 && files[len(files)-1] == name {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("relay: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("relay: %w", err)
		}
		// Open truncated a torn tail, so the file ends on a boundary.
		if pos != st.Size() && pos != int64(len(magic)) {
			f.Close()
			return fmt.Errorf("relay: source resumes %s at %d but the relay holds %d bytes", name, pos, st.Size())
		}
		if _, err := f.Seek(st.Size(), 0); err != nil {
			f.Close()
			return fmt.Errorf("relay: %w", err)
		}
		w.open(name, f, st.Size())
		return w.readChecksum()
	}
	for _, n := range files {
		if n == name {
			return fmt.Errorf("relay: source sends %s again, which the relay already finished", name)
		}
	}
	if pos != int64(len(magic)) && (pos != w.fillTo || len(files) > 0) {
		return fmt.Errorf("relay: cannot start the new relay file %s at offset %d; request offset 4", name, pos)
	}
	w.dropMark()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, private.FileMode)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if _, err := f.Write(magic); err != nil {
		f.Close()
		return fmt.Errorf("relay: %w", err)
	}
	if err := w.l.addFile(name); err != nil {
		f.Close()
		return err
	}
	w.open(name, f, int64(len(magic)))
	return nil
}

func (w *Writer) open(name string, f *os.File, size int64) {
	w.name, w.f, w.size, w.boundary = name, f, size, size
	w.groups = groupTracker{}
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 1<<20)
	} else {
		w.bw.Reset(f)
	}
}

// readChecksum learns the checksum setting of a resumed file from its FDE.
func (w *Writer) readChecksum() error {
	if w.size <= int64(len(magic)) {
		return nil
	}
	hb := make([]byte, headerSize)
	if _, err := w.f.ReadAt(hb, int64(len(magic))); err != nil {
		return fmt.Errorf("relay: read FDE of %s: %w", w.name, err)
	}
	h, err := parseHeader(hb)
	if err != nil || h.Type != fdeType {
		return fmt.Errorf("relay: %s does not start with a format description event", w.name)
	}
	raw := make([]byte, h.Size)
	if _, err := w.f.ReadAt(raw, int64(len(magic))); err != nil {
		return fmt.Errorf("relay: read FDE of %s: %w", w.name, err)
	}
	w.checksum = fdeChecksum(raw)
	return nil
}

// finishFile flushes, fsyncs and closes the current file and publishes it
// whole.
func (w *Writer) finishFile() error {
	if err := w.waitSync(); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("relay: flush %s: %w", w.name, err)
	}
	if w.l.cfg.Sync != SyncNone {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("relay: fsync %s: %w", w.name, err)
		}
		w.markTail(w.boundary)
	}
	w.l.publish(w.name, w.boundary)
	err := w.f.Close()
	w.f = nil
	w.unflushed, w.dirty = 0, false
	if err != nil {
		return fmt.Errorf("relay: close %s: %w", w.name, err)
	}
	return nil
}

// Flush writes buffered events, fsyncs as the policy says and publishes the
// complete transactions to readers.
func (w *Writer) Flush() error {
	w.lastFlush = time.Now()
	if w.f == nil {
		return nil
	}
	if w.unflushed > 0 {
		if err := w.bw.Flush(); err != nil {
			return fmt.Errorf("relay: flush %s: %w", w.name, err)
		}
		w.unflushed = 0
	}
	if err := w.syncResult(); err != nil {
		return err
	}
	if w.dirty {
		switch {
		case w.l.cfg.Sync == SyncCommit:
			// Readers see only what is durable.
			if err := w.f.Sync(); err != nil {
				return fmt.Errorf("relay: fsync %s: %w", w.name, err)
			}
			w.lastSync, w.dirty = time.Now(), false
			w.markTail(w.boundary)
		case w.l.cfg.Sync == SyncInterval && w.syncing == nil && time.Since(w.lastSync) >= w.l.cfg.SyncInterval:
			w.syncInBackground()
		}
	}
	w.l.publish(w.name, w.boundary)
	if w.l.cfg.Retain >= 0 && time.Since(w.l.lastPurge()) > time.Minute {
		if _, err := w.l.Purge(time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// syncInBackground starts the interval policy's fsync of what the file
// holds now, and the tail mark after it, off the writer's path. Under that
// policy readers never waited for fsyncs to see data, but the fsync ran
// inline before the publish: on a busy disk it took 100-650 ms, and every
// transaction that arrived meanwhile reached the applier and sluice serve's
// consumers that much later (bench-cdc's DT p99, issue 14). Writes go on
// meanwhile (a write and an fsync of one file may run at once); the mark
// records the boundary taken here, which the fsync covers. Only this
// goroutine touches the mark until waitSync.
func (w *Writer) syncInBackground() {
	f, name, checksum, boundary := w.f, w.name, w.checksum, w.boundary
	done := make(chan error, 1)
	w.syncing = done
	w.lastSync, w.dirty = time.Now(), false
	go func() {
		if err := f.Sync(); err != nil {
			done <- fmt.Errorf("relay: fsync %s: %w", name, err)
			return
		}
		w.markTailOf(f, name, checksum, boundary)
		done <- nil
	}()
}

// syncResult collects a finished background fsync's result without waiting.
func (w *Writer) syncResult() error {
	if w.syncing == nil {
		return nil
	}
	select {
	case err := <-w.syncing:
		w.syncing = nil
		if err != nil {
			w.dirty = true
		}
		return err
	default:
		return nil
	}
}

// waitSync waits for a background fsync, before the file is finished or
// closed or the mark is touched.
func (w *Writer) waitSync() error {
	if w.syncing == nil {
		return nil
	}
	err := <-w.syncing
	w.syncing = nil
	if err != nil {
		w.dirty = true
	}
	return err
}

// Close flushes, fsyncs and closes the current file.
func (w *Writer) Close() error {
	err := w.waitSync()
	if w.f != nil {
		if err == nil {
			err = w.Flush()
		}
		if err = errors.Join(err, w.waitSync()); err == nil && w.dirty {
			if err = w.f.Sync(); err == nil {
				w.markTail(w.boundary)
			}
		}
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
		w.f = nil
	}
	if w.mark != nil {
		w.mark.Close()
		w.mark = nil
	}
	w.l.mu.Lock()
	w.l.writer = false
	w.l.mu.Unlock()
	return err
}

// Source is a stream of binlog events from a server; binlog.Reader is one.
// TryEvent returns an event only if one is ready without waiting.
type Source interface {
	GetEvent(ctx context.Context) (*replication.BinlogEvent, error)
	TryEvent() (*replication.BinlogEvent, bool)
}

// Run copies src into the relay until ctx ends or an error occurs. It
// publishes whenever the source has nothing more ready (so one fsync covers
// every transaction that arrived meanwhile), and at least every
// FlushInterval or FlushBytes while events keep coming.
func (w *Writer) Run(ctx context.Context, src Source) error {
	defer w.clock.End(w.clock.Begin())
	for {
		ev, ok := src.TryEvent()
		if !ok {
			if err := w.timedFlush(); err != nil {
				return w.diskError(err)
			}
			t0 := w.clock.Enter(stagetime.WaitInput)
			var err error
			ev, err = src.GetEvent(ctx)
			w.clock.Leave(stagetime.WaitInput, t0)
			if err != nil {
				return err
			}
		}
		if err := w.Write(ev); err != nil {
			return w.diskError(err)
		}
		if w.unflushed >= w.l.cfg.FlushBytes || time.Since(w.lastFlush) >= w.l.cfg.FlushInterval {
			if err := w.timedFlush(); err != nil {
				return w.diskError(err)
			}
		}
	}
}

// timedFlush is Flush, timed as the flush state.
func (w *Writer) timedFlush() error {
	t0 := w.clock.Enter(stagetime.Flush)
	defer w.clock.Leave(stagetime.Flush, t0)
	return w.Flush()
}

// diskError gives a full disk under the relay its fix. What was written
// stays: the relay resumes at its last complete transaction.
func (w *Writer) diskError(err error) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	return &sluice.Error{Op: "relay log in " + w.l.cfg.Dir, Err: fmt.Errorf("%w: %v", sluice.ErrDiskFull, err),
		Hint: "free space on that disk (applied relay files are kept for incremental.relay-retain: lower it to keep fewer), or move the task's dir:, then start the task again; it resumes at the last complete transaction"}
}
