package relay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
)

// synth builds the events of one relay file, with log_pos and (when the FDE
// says so) checksums as a MariaDB server writes them.
type synth struct {
	rng      *rand.Rand
	checksum bool
	off      int64
	seq      uint64
}

func (g *synth) event(typ replication.EventType, body []byte, flags uint16) []byte {
	size := headerSize + len(body)
	if g.checksum || typ == fdeType {
		size += 4
	}
	raw := make([]byte, headerSize, size)
	binary.LittleEndian.PutUint32(raw[0:], 1_700_000_000)
	raw[4] = byte(typ)
	binary.LittleEndian.PutUint32(raw[5:], 1)
	binary.LittleEndian.PutUint32(raw[9:], uint32(size))
	binary.LittleEndian.PutUint32(raw[13:], uint32(g.off)+uint32(size))
	binary.LittleEndian.PutUint16(raw[17:], flags)
	raw = append(raw, body...)
	if len(raw) < size {
		raw = binary.LittleEndian.AppendUint32(raw, crc32.ChecksumIEEE(raw))
	}
	g.off += int64(size)
	return raw
}

func (g *synth) fde() []byte {
	body := make([]byte, 2+50+4+1)
	binary.LittleEndian.PutUint16(body, 4)
	copy(body[2:], "10.11.19-MariaDB-log")
	body[56] = headerSize
	body = append(body, make([]byte, 40)...) // post-header lengths
	alg := byte(replication.BINLOG_CHECKSUM_ALG_OFF)
	if g.checksum {
		alg = byte(replication.BINLOG_CHECKSUM_ALG_CRC32)
	}
	return g.event(fdeType, append(body, alg), 0)
}

func (g *synth) gtid(flags byte) []byte {
	g.seq++
	b := binary.LittleEndian.AppendUint64(nil, g.seq)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return g.event(replication.MARIADB_GTID_EVENT, append(b, flags), 0)
}

func (g *synth) rows() []byte {
	b := make([]byte, 1+g.rng.Intn(6000))
	g.rng.Read(b)
	return g.event(replication.WRITE_ROWS_EVENTv1, b, 0)
}

// txn is one random event group, of the kinds a MariaDB source writes.
func (g *synth) txn() [][]byte {
	var evs [][]byte
	switch g.rng.Intn(5) {
	case 0, 1: // transactional DML: GTID, annotate, table map, rows..., XID
		evs = append(evs, g.gtid(8), g.event(replication.MARIADB_ANNOTATE_ROWS_EVENT, []byte("INSERT INTO t VALUES (1)"), 0),
			g.event(replication.TABLE_MAP_EVENT, make([]byte, 30), 0))
		for n := g.rng.Intn(6); n >= 0; n-- {
			evs = append(evs, g.rows())
		}
		evs = append(evs, g.event(replication.XID_EVENT, make([]byte, 8), 0))
	case 2: // non-transactional: GTID, BEGIN, rows, COMMIT
		evs = append(evs, g.gtid(0), g.event(replication.QUERY_EVENT, query("BEGIN"), 0),
			g.event(replication.TABLE_MAP_EVENT, make([]byte, 30), 0), g.rows(), g.event(replication.QUERY_EVENT, query("COMMIT"), 0))
	case 3: // DDL: standalone GTID and one statement
		evs = append(evs, g.gtid(1), g.event(replication.QUERY_EVENT, query("ALTER TABLE t ADD c"+strconv.Itoa(g.rng.Intn(1000))+" int"), 0))
	case 4: // an event outside any group
		evs = append(evs, g.event(replication.MARIADB_BINLOG_CHECKPOINT_EVENT, []byte("\x0fmysql-bin.000001"), 0))
	}
	return evs
}

func writeRaw(t *testing.T, w *Writer, raw []byte) {
	t.Helper()
	h, _ := parseHeader(raw)
	if err := w.Write(&replication.BinlogEvent{RawData: raw, Header: &replication.EventHeader{EventType: h.Type, Flags: h.Flags, LogPos: h.LogPos}}); err != nil {
		t.Fatal(err)
	}
}

func rotateTo(t *testing.T, w *Writer, name string) {
	t.Helper()
	rot := make([]byte, headerSize+8+len(name))
	rot[4] = byte(replication.ROTATE_EVENT)
	binary.LittleEndian.PutUint32(rot[9:], uint32(len(rot)))
	binary.LittleEndian.PutUint16(rot[17:], replication.LOG_EVENT_ARTIFICIAL_F)
	binary.LittleEndian.PutUint64(rot[headerSize:], 4)
	copy(rot[headerSize+8:], name)
	if err := w.Write(&replication.BinlogEvent{RawData: rot, Header: &replication.EventHeader{EventType: replication.ROTATE_EVENT, Flags: replication.LOG_EVENT_ARTIFICIAL_F},
		Event: &replication.RotateEvent{Position: 4, NextLogName: []byte(name)}}); err != nil {
		t.Fatal(err)
	}
}

// crash leaves the writer as a kill -9 would: what it had buffered reached
// the file (or not), nothing more was fsynced or marked.
func crash(t *testing.T, w *Writer, flushBuffer bool) {
	t.Helper()
	// A background fsync finishes first: the test then replaces the mark,
	// which that fsync would otherwise write over. (A real crash during
	// one leaves the old mark or the new, both durable boundaries.)
	if err := w.waitSync(); err != nil {
		t.Fatal(err)
	}
	if flushBuffer {
		if err := w.bw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	w.f.Close()
	if w.mark != nil {
		w.mark.Close()
	}
}

// referenceRecover is the full scan Open used before the tail mark, kept
// verbatim: the mark must change nothing but the cost.
func referenceRecover(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	good := int64(0)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(f, head); err == nil && string(head) == string(magic) {
		good = int64(len(magic))
		var groups groupTracker
		checksum := false
		off := good
		r := bufio.NewReaderSize(f, 1<<20)
		for {
			hb, err := r.Peek(headerSize)
			if err == io.EOF && len(hb) == 0 {
				break
			}
			if err != nil {
				break
			}
			h, err := parseHeader(hb)
			if err != nil {
				break
			}
			raw := make([]byte, h.Size)
			if _, err := io.ReadFull(r, raw); err != nil {
				break
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
	if good < int64(len(magic)) {
		if err := f.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := f.WriteAt(magic, 0); err != nil {
			return 0, err
		}
		return int64(len(magic)), nil
	}
	return good, f.Truncate(good)
}

func testSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if s := os.Getenv("RELAY_TAIL_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with RELAY_TAIL_SEED=%d)", seed, seed)
		}
	})
	return seed
}

// TestTailMarkRecoversLikeTheFullScan writes random relay files through the
// Writer (fsyncs, and so marks, at random points), crashes it, tears the
// tail at random (truncated, garbage, zeros, and, against the rules, below
// the durable mark), then replaces the mark with a variant (the writer's, a
// stale one, a corrupt one, one naming another file, a forged one inside a
// transaction, a truncated one, none) and checks that Open leaves exactly
// the bytes and the end the full scan leaves.
func TestTailMarkRecoversLikeTheFullScan(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	const name = "mysql-bin.000007"
	iterations := 150
	if testing.Short() {
		iterations = 30
	}
	used := map[string]int{}
	for it := 0; it < iterations; it++ {
		dir := t.TempDir()
		cfg := DefaultConfig(dir)
		cfg.Sync = SyncCommit
		if rng.Intn(2) == 0 {
			// The interval policy's fsyncs (and marks) run in the
			// background, at every flush that finds none running.
			cfg.Sync, cfg.SyncInterval = SyncInterval, time.Nanosecond
		}
		l, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.NewWriter()
		if err != nil {
			t.Fatal(err)
		}
		g := &synth{rng: rng, checksum: rng.Intn(2) == 0, off: 4}
		rotateTo(t, w, name)
		writeRaw(t, w, g.fde())
		var marks [][]byte    // the mark after each flush
		var notBoundary int64 // an event start inside a transaction
		for n := 1 + rng.Intn(40); n > 0; n-- {
			for i, raw := range g.txn() {
				if i == 1 && notBoundary == 0 {
					notBoundary = g.off - int64(len(raw))
				}
				writeRaw(t, w, raw)
			}
			if rng.Intn(4) == 0 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(filepath.Join(dir, MarkName)); err == nil {
					marks = append(marks, b)
				}
			}
		}
		// An unfinished transaction, sometimes.
		if rng.Intn(2) == 0 {
			evs := g.txn()
			for _, raw := range evs[:rng.Intn(len(evs))] {
				writeRaw(t, w, raw)
			}
		}
		crash(t, w, rng.Intn(4) != 0)
		l.Close()

		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		durable := int64(len(magic))
		if m, ok := readMark(dir); ok {
			durable = m.off
		}
		// Tear what was not durable.
		tear := "none"
		switch rng.Intn(5) {
		case 0:
			tear = "truncated"
			err = os.Truncate(path, durable+rng.Int63n(st.Size()-durable+1))
		case 1:
			tear = "garbage"
			err = os.Truncate(path, durable+rng.Int63n(st.Size()-durable+1))
			if err == nil {
				junk := make([]byte, 1+rng.Intn(5000))
				rng.Read(junk)
				err = appendFile(path, junk)
			}
		case 2:
			tear = "zeros"
			err = os.Truncate(path, durable+rng.Int63n(st.Size()-durable+1))
			if err == nil {
				err = appendFile(path, make([]byte, 1+rng.Intn(9000)))
			}
		case 3:
			tear = "below the mark"
			err = os.Truncate(path, int64(len(magic))+rng.Int63n(durable-int64(len(magic))+1))
		}
		if err != nil {
			t.Fatal(err)
		}
		// The mark variant.
		variant := "writer's"
		markPath := filepath.Join(dir, MarkName)
		m, _ := readMark(dir)
		forged := func(name string, off int64) []byte {
			c, err := windowCRCOf(path, off)
			if err != nil {
				return nil
			}
			return tailMark{name: name, off: off, checksum: g.checksum, window: c}.encode()
		}
		switch rng.Intn(7) {
		case 1:
			if len(marks) > 1 {
				variant = "stale"
				err = os.WriteFile(markPath, marks[rng.Intn(len(marks)-1)], 0o600)
			}
		case 2:
			if b, rerr := os.ReadFile(markPath); rerr == nil && len(b) > 0 {
				variant = "corrupt"
				b[rng.Intn(len(b))] ^= byte(1 + rng.Intn(255))
				err = os.WriteFile(markPath, b, 0o600)
			}
		case 3:
			if notBoundary > 0 {
				if b := forged("mysql-bin.000006", notBoundary); b != nil {
					variant = "another file's"
					err = os.WriteFile(markPath, b, 0o600)
				}
			}
		case 4:
			if m.off > 0 {
				variant = "truncated"
				b, _ := os.ReadFile(markPath)
				err = os.WriteFile(markPath, b[:rng.Intn(len(b))], 0o600)
			}
		case 5:
			variant = "none"
			err = os.Remove(markPath)
			if errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		case 6:
			// A valid mark for this file whose offset is in the middle of a
			// transaction cannot come from the writer; with its record CRC
			// broken it must be refused.
			if notBoundary > 0 {
				if b := forged(name, notBoundary); b != nil {
					variant = "forged, record CRC broken"
					b[len(b)-1] ^= 0xff
					err = os.WriteFile(markPath, b, 0o600)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		used[tear+" / "+variant]++

		// The reference: the full scan on a copy of the same bytes.
		torn, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ref := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(ref, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		want, err := referenceRecover(ref)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes, _ := os.ReadFile(ref)

		l, err = Open(cfg)
		if err != nil {
			t.Fatalf("iteration %d (%s tail, %s mark): %v", it, tear, variant, err)
		}
		gotBytes, _ := os.ReadFile(path)
		if end := l.End(); int64(end.Pos) != want || !bytes.Equal(gotBytes, wantBytes) {
			t.Fatalf("iteration %d (%s tail, %s mark, checksum %v): Open ends the relay at %d (%d bytes), the full scan at %d (%d bytes)",
				it, tear, variant, g.checksum, end.Pos, len(gotBytes), want, len(wantBytes))
		}
		l.Close()
	}
	t.Logf("cases: %v", used)
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func windowCRCOf(path string, off int64) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return windowCRC(f, off)
}

// countingFile counts the bytes recovery reads.
type countingFile struct {
	*os.File
	read int64
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

// TestTailMarkReadsOnlyTheTail: with a valid mark, recovering a large relay
// file reads the mark's window and what lies past it, not the file; without
// it, the whole file.
func TestTailMarkReadsOnlyTheTail(t *testing.T) {
	seed := testSeed(t)
	dir := t.TempDir()
	const name = "mysql-bin.000001"
	cfg := DefaultConfig(dir)
	cfg.Sync = SyncCommit
	l, w, g := synthRelay(t, cfg, name, seed)
	for g.off < 32<<20 {
		for _, raw := range g.txn() {
			writeRaw(t, w, raw)
		}
	}
	if err := w.Flush(); err != nil { // fsync and mark
		t.Fatal(err)
	}
	marked := g.off
	// A torn transaction after the mark: written, never fsynced.
	// A drawn transaction of one event is not written: its offsets are
	// taken back, so the next one continues the relay.
	at := g.off
	evs := g.txn()
	for len(evs) < 2 {
		g.off = at
		evs = g.txn()
	}
	for _, raw := range evs[:len(evs)-1] {
		writeRaw(t, w, raw)
	}
	crash(t, w, true)
	l.Close()

	path := filepath.Join(dir, name)
	copyPath := filepath.Join(t.TempDir(), name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tail := int64(len(b)) - marked
	m, ok := readMark(dir)
	if !ok || m.off != marked || m.name != name {
		t.Fatalf("mark %+v (%v), want %s at %d", m, ok, name, marked)
	}
	for _, useMark := range []bool{true, false} {
		p := path
		if !useMark {
			p = copyPath
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		cf := &countingFile{File: f}
		good, err := recoverFile(cf, int64(len(b)), m, useMark)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if good != marked {
			t.Fatalf("mark %v: recovered to %d, want %d", useMark, good, marked)
		}
		t.Logf("mark %v: read %d bytes of a %d-byte file (tail past the mark %d bytes)", useMark, cf.read, len(b), tail)
		if useMark && cf.read > tail+2*markWindow+64<<10 {
			t.Fatalf("with the mark, recovery read %d bytes; the tail past the mark is %d", cf.read, tail)
		}
		if !useMark && cf.read < int64(len(b))-tail {
			t.Fatalf("without the mark, recovery read only %d bytes of %d", cf.read, len(b))
		}
	}
	// And Open takes the mark.
	l, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if end := l.End(); int64(end.Pos) != marked {
		t.Fatalf("Open ends the relay at %d, want %d", end.Pos, marked)
	}
}

// The mark's record survives a round trip and refuses damage.
func TestTailMarkEncoding(t *testing.T) {
	m := tailMark{name: "mysql-bin.000123", off: 1 << 33, checksum: true, window: 0xdeadbeef}
	b := m.encode()
	if got, ok := decodeMark(b); !ok || got != m {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	if got, ok := decodeMark(append(b, "trailing bytes of a longer record"...)); !ok || got != m {
		t.Fatalf("with trailing bytes: %+v %v", got, ok)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, ok := decodeMark(c); ok {
			t.Fatalf("a flipped byte at %d was accepted", i)
		}
		if _, ok := decodeMark(b[:i]); ok {
			t.Fatalf("a record cut at %d was accepted", i)
		}
	}
}

// synthRelay opens a relay with cfg and starts file name in it with a
// synthetic format description event (checksums on), its events drawn
// from seed.
func synthRelay(t *testing.T, cfg Config, name string, seed int64) (*Log, *Writer, *synth) {
	t.Helper()
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	g := &synth{rng: rand.New(rand.NewSource(seed)), checksum: true, off: 4}
	rotateTo(t, w, name)
	writeRaw(t, w, g.fde())
	return l, w, g
}
