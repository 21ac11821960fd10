// Package relay stores a source's binlog on local disk and tails it.
//
// Relay files are byte-identical copies of the source's binlog files: same
// names, same offsets, same bytes (the one exception is the format
// description event a server resends with log_pos 0 when a dump starts
// mid-file; the relay stores it with the log_pos it has in the source file).
// A position therefore means the same thing in the source and in the relay,
// the relay can be served to replicas as it is, and mariadb-binlog reads the
// files directly. An index file, relay.index, lists the files in order.
//
// The writer appends events as they arrive and publishes them in whole
// transactions: readers never see a partial transaction, so a torn tail
// after a crash (which Open truncates) was never read by anyone.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/private"
)

// SyncPolicy says when relay files are fsynced.
type SyncPolicy string

const (
	// SyncCommit fsyncs before transactions become visible to readers
	// (grouped: one fsync covers every transaction that arrived meanwhile).
	SyncCommit SyncPolicy = "commit"
	// SyncInterval fsyncs at most every Config.SyncInterval.
	SyncInterval SyncPolicy = "interval"
	// SyncNone leaves flushing to the operating system.
	SyncNone SyncPolicy = "none"
)

// IndexName is the index file inside the relay directory.
const IndexName = "relay.index"

// Config configures a relay log.
type Config struct {
	Dir          string
	Sync         SyncPolicy
	SyncInterval time.Duration
	// FlushInterval bounds how long written events wait before readers see
	// them while the source keeps sending.
	FlushInterval time.Duration
	// FlushBytes publishes after this many buffered bytes.
	FlushBytes int
	// Retain is how long a file that every reader has passed is kept.
	Retain time.Duration
	// RetainBytes, when positive, bounds the relay's size: the oldest
	// files that every reader has passed go, however young, while the
	// relay is larger.
	RetainBytes int64
	// Flavor is "mariadb" or "mysql": how GTIDs are read.
	Flavor string
}

// DefaultConfig returns the defaults for a relay in dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, Sync: SyncInterval, SyncInterval: time.Second, FlushInterval: 20 * time.Millisecond,
		FlushBytes: 4 << 20, Retain: 24 * time.Hour, Flavor: "mariadb"}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "relay log", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Dir == "" {
		return bad("empty directory", "set the task's dir")
	}
	switch c.Sync {
	case SyncCommit, SyncInterval, SyncNone:
	default:
		return bad(fmt.Sprintf("relay-sync %q", c.Sync), "use commit, interval or none")
	}
	if c.Sync == SyncInterval && c.SyncInterval <= 0 {
		return bad("sync interval must be positive", "set a positive sync interval")
	}
	if c.FlushInterval <= 0 || c.FlushBytes <= 0 {
		return bad("flush interval and bytes must be positive", "use DefaultConfig")
	}
	if c.Retain < 0 {
		return bad("relay-retain is negative", "use a duration such as 24h")
	}
	if c.RetainBytes < 0 {
		return bad("the retained size is negative", "use a size such as 10G")
	}
	switch c.Flavor {
	case "mariadb", "mysql":
	default:
		return bad(fmt.Sprintf("flavor %q", c.Flavor), "use mariadb or mysql")
	}
	return nil
}

type fileState struct {
	name string
	size int64 // published size: every byte below it belongs to complete transactions
	done bool  // the writer has moved on; size is final
	// from is the first offset the relay holds: 4, or the end of the head
	// of a first file that starts inside the source's file (head.go).
	from int64
}

// Log is one relay directory. Writer and readers of the same Log share its
// published state; a Log opened without a writer serves what is on disk.
type Log struct {
	cfg Config

	mu      sync.Mutex
	files   []fileState
	changed chan struct{} // closed and replaced on every publish
	writer  bool
	closed  bool
	applied sluice.Position
	purged  time.Time
	// readers holds the file each open Reader is on: Purge keeps it and
	// every later file, so that a reader (a served replica, the applier)
	// never loses the file under it.
	readers map[*Reader]string
}

// Open opens (creating if needed) the relay in cfg.Dir. It truncates a torn
// tail of the last file back to its last transaction boundary, so writing
// resumes exactly where complete data ends.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := private.MkdirAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if err := private.Tighten(cfg.Dir); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	l := &Log{cfg: cfg, changed: make(chan struct{}), readers: map[*Reader]string{}}
	names, err := readIndex(filepath.Join(cfg.Dir, IndexName))
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		st, err := os.Stat(filepath.Join(cfg.Dir, n))
		if err != nil {
			return nil, fmt.Errorf("relay: file %s listed in %s: %w", n, IndexName, err)
		}
		size := st.Size()
		if i == len(names)-1 {
			if size, err = recoverTail(cfg.Dir, n); err != nil {
				return nil, err
			}
		}
		from := int64(len(magic))
		if i == 0 {
			if from, err = headEnd(filepath.Join(cfg.Dir, n)); err != nil {
				return nil, err
			}
		}
		l.files = append(l.files, fileState{name: n, size: size, done: i < len(names)-1, from: from})
	}
	return l, nil
}

// End is the position after the last complete transaction in the relay;
// zero when the relay is empty.
func (l *Log) End() sluice.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.files) == 0 {
		return sluice.Position{}
	}
	f := l.files[len(l.files)-1]
	return sluice.Position{File: f.name, Pos: uint32(f.size), Flavor: l.cfg.Flavor}
}

// Files lists the relay's files in order.
func (l *Log) Files() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.files))
	for i, f := range l.files {
		out[i] = f.name
	}
	return out
}

// Size is the published size of a relay file: up to its last complete
// transaction (0 when the relay does not hold the file).
func (l *Log) Size(name string) int64 {
	size, _, _, _, _, _ := l.limit(name)
	return size
}

// Has reports whether pos lies inside the relay's published data.
func (l *Log) Has(pos sluice.Position) bool {
	ok, _ := l.holds(pos)
	return ok
}

// holds reports whether pos lies inside the published data, and whether it
// lies before the data of the relay's first file (which will never hold it).
func (l *Log) holds(pos sluice.Position) (ok, before bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.files {
		if f.name == pos.File {
			p := max(int64(pos.Pos), int64(len(magic)))
			return p >= f.from && p <= f.size, p < f.from
		}
	}
	return false, false
}

// errBefore: the relay started after a position it is asked for.
func errBefore(pos sluice.Position) error {
	return &sluice.Error{Op: "read relay log", Err: fmt.Errorf("%w: the relay starts after %s", sluice.ErrBinlogPurged, pos),
		Hint: "the relay no longer holds this position; restart so sluice fetches it from the source again"}
}

// WaitFor blocks until the relay holds pos (the writer has stored
// everything up to it), ctx ends, or the Log is closed.
func (l *Log) WaitFor(ctx context.Context, pos sluice.Position) error {
	for {
		l.mu.Lock()
		ch, closed := l.changed, l.closed
		l.mu.Unlock()
		ok, before := l.holds(pos)
		if ok {
			return nil
		}
		if before {
			return errBefore(pos)
		}
		if closed {
			return ErrClosed
		}
		if err := waitChange(ctx, ch); err != nil {
			return err
		}
	}
}

// Dir is the relay directory.
func (l *Log) Dir() string { return l.cfg.Dir }

// Reset removes every relay file, for a start from a position the relay
// does not hold. It fails while a writer is open.
func (l *Log) Reset() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writer {
		return errors.New("relay: reset while a writer is open")
	}
	for _, f := range l.files {
		if err := os.Remove(filepath.Join(l.cfg.Dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("relay: reset: %w", err)
		}
	}
	l.files = nil
	if err := os.Remove(filepath.Join(l.cfg.Dir, MarkName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("relay: reset: %w", err)
	}
	return writeIndex(l.cfg.Dir, nil)
}

// Close wakes every waiting reader; they return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.changed)
	}
	return nil
}

// ErrClosed is returned by readers of a closed Log.
var ErrClosed = errors.New("relay: closed")

// publish makes the last file's data up to size visible; with next, the
// last file is finished and next starts.
func (l *Log) publish(name string, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.files); n > 0 && l.files[n-1].name == name && l.files[n-1].size != size {
		l.files[n-1].size = size
		l.notifyLocked()
	}
}

func (l *Log) notifyLocked() {
	if !l.closed {
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// addFile appends a new, empty (magic only) file to the index.
func (l *Log) addFile(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.files)+1)
	for i := range l.files {
		l.files[i].done = true
		names = append(names, l.files[i].name)
	}
	names = append(names, name)
	if err := writeIndex(l.cfg.Dir, names); err != nil {
		return err
	}
	l.files = append(l.files, fileState{name: name, size: int64(len(magic)), from: int64(len(magic))})
	l.notifyLocked()
	return nil
}

// setFrom records the end of the head the writer filled in file name.
func (l *Log) setFrom(name string, from int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.files {
		if l.files[i].name == name {
			l.files[i].from = from
		}
	}
}

// headEnd returns the end of the filled head of a relay file, or 4 when it
// has none. The head is the FDE, a GTID list and fillers (head.go); it reads
// only their headers.
func headEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("relay: %w", err)
	}
	defer f.Close()
	from, off := int64(len(magic)), int64(len(magic))
	buf := make([]byte, headerSize+len(fillerTag))
	for {
		n, err := f.ReadAt(buf, off)
		if n < headerSize {
			if err != nil && err != io.EOF {
				return 0, fmt.Errorf("relay: %s: %w", path, err)
			}
			return from, nil
		}
		h, err := parseHeader(buf[:n])
		if err != nil {
			return from, nil
		}
		switch {
		case isFiller(h, buf[:n]):
			from = off + int64(h.Size)
		case h.Type == fdeType || h.Type == replication.MARIADB_GTID_LIST_EVENT || h.Type == replication.PREVIOUS_GTIDS_EVENT:
		default:
			return from, nil
		}
		off += int64(h.Size)
	}
}

// limit tells a reader of file name how far it may read, whether the file
// is finished, the next file, and the channel that is closed on change.
func (l *Log) limit(name string) (size int64, done bool, next string, ok bool, changed <-chan struct{}, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, f := range l.files {
		if f.name == name {
			if i+1 < len(l.files) {
				next = l.files[i+1].name
			}
			return f.size, f.done, next, true, l.changed, l.closed
		}
	}
	return 0, false, "", false, l.changed, l.closed
}

// SetApplied records how far the applier has durably applied; files before
// it become candidates for purging once older than Retain.
func (l *Log) SetApplied(pos sluice.Position) {
	l.mu.Lock()
	l.applied = pos
	l.mu.Unlock()
}

// Purge removes files that lie wholly before the applied position and
// before the file of every open reader, and whose modification time is
// older than Retain or, oldest first, while the relay is larger than
// RetainBytes. It returns the removed names.
func (l *Log) Purge(now time.Time) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.purged = now
	if l.applied.File == "" {
		return nil, nil
	}
	cut := -1
	for i, f := range l.files {
		if f.name == l.applied.File {
			cut = i
			break
		}
	}
	for i := 0; i < cut; i++ {
		if l.reading(l.files[i].name) {
			cut = i
			break
		}
	}
	var removed []string
	var total int64
	for _, f := range l.files {
		total += f.size
	}
	keep := 0
	for i := 0; i < cut; i++ {
		p := filepath.Join(l.cfg.Dir, l.files[i].name)
		st, err := os.Stat(p)
		tooBig := l.cfg.RetainBytes > 0 && total > l.cfg.RetainBytes
		if err == nil && now.Sub(st.ModTime()) < l.cfg.Retain && !tooBig {
			break // files are in order: later ones are younger
		}
		total -= l.files[i].size
		keep = i + 1
		removed = append(removed, l.files[i].name)
	}
	if keep == 0 {
		return nil, nil
	}
	rest := l.files[keep:]
	names := make([]string, len(rest))
	for i, f := range rest {
		names[i] = f.name
	}
	// Index first: a crash between the two leaves stray files, never an
	// index naming missing ones.
	if err := writeIndex(l.cfg.Dir, names); err != nil {
		return nil, err
	}
	l.files = append([]fileState(nil), rest...)
	for _, n := range removed {
		if err := os.Remove(filepath.Join(l.cfg.Dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("relay: purge %s: %w", n, err)
		}
	}
	return removed, nil
}

// reading reports whether an open reader is on the file. l.mu is held.
func (l *Log) reading(name string) bool {
	for _, f := range l.readers {
		if f == name {
			return true
		}
	}
	return false
}

// hold records that r reads name from now on, unless name was purged
// (false): under l.mu, so that no purge falls between the check and the
// record.
func (l *Log) hold(r *Reader, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.files {
		if f.name == name {
			l.readers[r] = name
			return true
		}
	}
	return false
}

// release forgets r's hold.
func (l *Log) release(r *Reader) {
	l.mu.Lock()
	delete(l.readers, r)
	l.mu.Unlock()
}

func (l *Log) lastPurge() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.purged
}

func readIndex(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("relay: read index: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, filepath.Base(line))
		}
	}
	return names, nil
}

// writeIndex replaces the index atomically.
func writeIndex(dir string, names []string) error {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, IndexName), []byte(b.String()), private.FileMode); err != nil {
		return fmt.Errorf("relay: write index: %w", err)
	}
	return nil
}

// waitChange blocks until ch is closed or ctx ends.
func waitChange(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
