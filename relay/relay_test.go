package relay_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/sandbox"
)

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position {
	return sandboxtest.MasterStatusGTID(tb, db)
}

// pump copies inst's binlog into l from start until stopped.
type pump struct {
	cancel context.CancelFunc
	done   chan error
	w      *relay.Writer
}

func startPump(tb testing.TB, inst *sandbox.Instance, l *relay.Log, start sluice.Position) *pump {
	tb.Helper()
	cfg := binlog.DefaultConfig(inst.Endpoint())
	cfg.Flavor = "mariadb"
	cfg.Heartbeat = 200 * time.Millisecond
	r, err := binlog.NewReader(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := l.NewWriter()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx, w.Resume(start)); err != nil {
		cancel()
		tb.Fatal(err)
	}
	p := &pump{cancel: cancel, done: make(chan error, 1), w: w}
	go func() {
		err := w.Run(ctx, r)
		r.Close()
		if cerr := w.Close(); err == nil || errors.Is(err, context.Canceled) {
			if cerr != nil {
				err = cerr
			}
		}
		p.done <- err
	}()
	return p
}

func (p *pump) stop(tb testing.TB) {
	tb.Helper()
	p.cancel()
	if err := <-p.done; err != nil && !errors.Is(err, context.Canceled) {
		tb.Fatalf("relay writer: %v", err)
	}
}

// waitEnd waits until the relay's published end reaches pos.
func waitEnd(tb testing.TB, l *relay.Log, p *pump, pos sluice.Position) {
	tb.Helper()
	sandboxtest.Eventually(tb, 5*time.Minute, fmt.Sprintf("the relay's end at %s", pos), func() bool {
		end := l.End()
		if end.Compare(pos) >= 0 {
			return true
		}
		select {
		case err := <-p.done:
			tb.Fatalf("relay writer stopped at %s before %s: %v", end, pos, err)
		default:
		}
		return false
	}, func() string { return fmt.Sprintf("end %s", l.End()) })
}

func openLog(tb testing.TB, dir string, sync relay.SyncPolicy) *relay.Log {
	tb.Helper()
	cfg := relay.DefaultConfig(dir)
	cfg.Sync = sync
	l, err := relay.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func writeSome(tb testing.TB, db *sql.DB) {
	sandboxtest.MustExec(tb, db,
		"CREATE DATABASE IF NOT EXISTS d",
		"CREATE TABLE IF NOT EXISTS d.t (id int primary key, v varchar(200), b longblob)",
		"INSERT INTO d.t VALUES (1,'one',NULL),(2,'two',NULL)",
		"UPDATE d.t SET v='uno' WHERE id=1",
		"FLUSH BINARY LOGS",
		"DELETE FROM d.t WHERE id=2",
		// Several row events in one transaction (rows larger than 8 KB).
		"INSERT INTO d.t SELECT seq+10, 'big', REPEAT('x', 20000) FROM d.seq_1_to_30",
		"ALTER TABLE d.t ADD COLUMN w int",
	)
}

func TestRelayIsIdenticalToSourceAndReadableByMariadbBinlog(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	first := masterStatus(t, db)
	writeSome(t, db)
	end := masterStatus(t, db)

	l := openLog(t, t.TempDir(), relay.SyncCommit)
	p := startPump(t, inst, l, sluice.Position{File: first.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)

	files := l.Files()
	if len(files) < 2 || files[0] != first.File || files[len(files)-1] != end.File {
		t.Fatalf("relay files %v, want %s..%s", files, first.File, end.File)
	}
	// The relay holds every row: it is its owner's only (issue 16).
	ents, err := os.ReadDir(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if st, err := os.Stat(filepath.Join(l.Dir(), e.Name())); err != nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("relay file %s: mode %v (%v), want no access for group and others", e.Name(), st.Mode(), err)
		}
	}
	if st, err := os.Stat(l.Dir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("relay directory: mode %v (%v), want 0700", st.Mode(), err)
	}
	for i, f := range files {
		got, err := os.ReadFile(filepath.Join(l.Dir(), f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(inst.Home, "data", f))
		if err != nil {
			t.Fatal(err)
		}
		if i == len(files)-1 {
			want = activeFile(want, len(got))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("relay file %s (%d bytes) differs from the source's (%d bytes) at offset %d", f, len(got), len(want), firstDiff(got, want))
		}
	}

	// mariadb-binlog decodes the relay's row events.
	bin, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		if bin, err = exec.LookPath("mysqlbinlog"); err != nil {
			t.Fatalf("mariadb-binlog not installed: %v", err)
		}
	}
	out, err := exec.Command(bin, "--no-defaults", "--base64-output=DECODE-ROWS", "-v", filepath.Join(l.Dir(), files[1])).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-binlog: %v: %s", err, out)
	}
	for _, want := range []string{"### DELETE FROM `d`.`t`", "### INSERT INTO `d`.`t`", "###   @1=40", "ALTER TABLE d.t ADD COLUMN w int"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("mariadb-binlog output lacks %q:\n%s", want, lastLines(string(out), 40))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestReaderTailsTransactionsWithPositionsAndGTIDs(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, v int)", "INSERT INTO d.t VALUES (0, 0)")
	start := masterStatus(t, db)

	l := openLog(t, t.TempDir(), relay.SyncInterval)
	p := startPump(t, inst, l, start)
	defer p.stop(t)
	waitEnd(t, l, p, start)

	// The reader starts in the middle of the first file without a GTID set:
	// it learns the set from the file's head.
	r, err := l.NewReader(sluice.Position{File: start.File, Pos: start.Pos}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Position(); got.GTIDSet != start.GTIDSet {
		t.Fatalf("GTID set at %s:%d = %q, want %q", start.File, start.Pos, got.GTIDSet, start.GTIDSet)
	}

	// Transactions written while the reader waits: it must wake for each.
	const n = 25
	want := make(chan sluice.Position, n)
	go func() {
		for i := 1; i <= n; i++ {
			if i == 10 {
				sandboxtest.MustExec(t, db, "FLUSH BINARY LOGS")
			}
			sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO d.t VALUES (%d, %d)", i, i*i))
			want <- masterStatus(t, db)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 1; i <= n; {
		ev, pos, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if re, ok := ev.Event.(*replication.RowsEvent); ok {
			if len(re.Rows) != 1 || fmt.Sprint(re.Rows[0][0]) != fmt.Sprint(i) || fmt.Sprint(re.Rows[0][1]) != fmt.Sprint(i*i) {
				t.Fatalf("transaction %d: rows %v", i, re.Rows)
			}
		}
		if _, ok := ev.Event.(*replication.XIDEvent); ok {
			w := <-want
			// After a rotation MariaDB may append a Binlog_checkpoint event
			// after the commit, so the source can be a little further.
			if pos.File != w.File || pos.Pos > w.Pos || pos.Pos+64 < w.Pos || pos.GTIDSet != w.GTIDSet {
				t.Fatalf("transaction %d ends at %s, source says %s", i, pos, w)
			}
			i++
		}
	}
	// Nothing more: Next blocks until ctx ends.
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if ev, _, err := r.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past the end returned %v, %v", ev, err)
	}
}

func TestTornTailIsTruncatedAndWritingResumes(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, v int)")
	first := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "INSERT INTO d.t VALUES (1, 1)")
	boundary := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "INSERT INTO d.t SELECT seq+1, seq FROM d.seq_1_to_3000")
	end := masterStatus(t, db)

	dir := t.TempDir()
	l := openLog(t, dir, relay.SyncNone)
	p := startPump(t, inst, l, sluice.Position{File: first.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)
	l.Close()

	// Cut the last transaction in the middle, as a crash while writing would.
	path := filepath.Join(dir, end.File)
	if err := os.Truncate(path, int64(boundary.Pos+(end.Pos-boundary.Pos)/2)); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, relay.SyncCommit)
	if got := l.End(); got.File != boundary.File || got.Pos != boundary.Pos {
		t.Fatalf("after recovery the relay ends at %s, want the last boundary %s:%d", got, boundary.File, boundary.Pos)
	}
	if st, _ := os.Stat(path); st.Size() != int64(boundary.Pos) {
		t.Fatalf("file not truncated: %d bytes", st.Size())
	}
	sandboxtest.MustExec(t, db, "INSERT INTO d.t VALUES (999999, 1)")
	end = masterStatus(t, db)
	p = startPump(t, inst, l, sluice.Position{})
	waitEnd(t, l, p, end)
	p.stop(t)
	got, _ := os.ReadFile(path)
	want, _ := os.ReadFile(filepath.Join(inst.Home, "data", end.File))
	want = activeFile(want, len(got))
	if !bytes.Equal(got, want) || len(got) != int(end.Pos) {
		t.Fatalf("resumed relay file differs from the source (%d vs %d bytes)", len(got), len(want))
	}
}

func TestPurgeRemovesAppliedFilesOnly(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	first := masterStatus(t, db)
	for i := 0; i < 3; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("CREATE DATABASE p%d", i), "FLUSH BINARY LOGS")
	}
	end := masterStatus(t, db)
	dir := t.TempDir()
	cfg := relay.DefaultConfig(dir)
	cfg.Retain = time.Hour
	l, err := relay.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := startPump(t, inst, l, sluice.Position{File: first.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)
	files := l.Files()
	if len(files) != 4 {
		t.Fatalf("files %v", files)
	}
	l.SetApplied(sluice.Position{File: files[2], Pos: 4})
	if removed, err := l.Purge(time.Now()); err != nil || len(removed) != 0 {
		t.Fatalf("young files purged: %v %v", removed, err)
	}
	removed, err := l.Purge(time.Now().Add(2 * time.Hour))
	if err != nil || len(removed) != 2 || removed[0] != files[0] || removed[1] != files[1] {
		t.Fatalf("purge removed %v (%v), want %v", removed, err, files[:2])
	}
	if _, err := os.Stat(filepath.Join(dir, files[0])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still on disk", files[0])
	}
	l.Close()
	l = openLog(t, dir, relay.SyncNone)
	if got := l.Files(); len(got) != 2 || got[0] != files[2] {
		t.Fatalf("index after purge: %v", got)
	}
	if _, err := l.NewReader(sluice.Position{File: files[0], Pos: 4}, nil); !errors.Is(err, sluice.ErrBinlogPurged) {
		t.Fatalf("reading a purged file: %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// activeFile adjusts the source's active binlog file for comparison: it keeps
// growing, and its FDE carries LOG_EVENT_BINLOG_IN_USE_F on disk, a flag the
// server clears in what it sends.
func activeFile(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	b = append([]byte(nil), b...)
	if len(b) > 4+19 {
		b[4+17] &^= 0x01
	}
	return b
}

// TestPurgeKeepsWhatReadersRead: a file an open reader is on, and every
// later one, survive a purge that the applied position and the retention
// would allow; the reader's move to the next file, and its Close, free
// them.
func TestPurgeKeepsWhatReadersRead(t *testing.T) {
	l, files := fourFiles(t, time.Hour, 0)
	l.SetApplied(sluice.Position{File: files[3], Pos: 4})
	later := time.Now().Add(2 * time.Hour)
	r, err := l.NewReader(sluice.Position{File: files[0], Pos: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := l.Purge(later); err != nil || len(removed) != 0 {
		t.Fatalf("purge removed %v (%v) under a reader of %s", removed, err, files[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for r.Position().File == files[0] {
		if _, err := r.NextRaw(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if removed, err := l.Purge(later); err != nil || len(removed) != 1 || removed[0] != files[0] {
		t.Fatalf("with the reader on %s, purge removed %v (%v), want %s", r.Position().File, removed, err, files[0])
	}
	r.Close()
	if removed, err := l.Purge(later); err != nil || len(removed) != 2 || removed[0] != files[1] || removed[1] != files[2] {
		t.Fatalf("after the reader closed, purge removed %v (%v), want %v", removed, err, files[1:3])
	}
}

// fourFiles is a relay of four files (three rotations of a source), with
// the given retention.
func fourFiles(t *testing.T, retain time.Duration, retainBytes int64) (*relay.Log, []string) {
	t.Helper()
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	first := masterStatus(t, db)
	for i := 0; i < 3; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("CREATE DATABASE r%d", i), "FLUSH BINARY LOGS")
	}
	end := masterStatus(t, db)
	cfg := relay.DefaultConfig(t.TempDir())
	cfg.Retain, cfg.RetainBytes = retain, retainBytes
	l, err := relay.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := startPump(t, inst, l, sluice.Position{File: first.File, Pos: 4})
	waitEnd(t, l, p, end)
	p.stop(t)
	files := l.Files()
	if len(files) != 4 {
		t.Fatalf("files %v", files)
	}
	return l, files
}

// TestPurgeBySize: with a size bound, the oldest applied files go however
// young, until the relay fits, but never a file a reader is on.
func TestPurgeBySize(t *testing.T) {
	l, files := fourFiles(t, time.Hour, 1) // everything is too big
	var sizes []int64
	for _, f := range files {
		sizes = append(sizes, l.Size(f))
	}
	l.Close()
	cfg := relay.DefaultConfig(l.Dir())
	// Room for the last two files only.
	cfg.Retain, cfg.RetainBytes = time.Hour, sizes[2]+sizes[3]
	l, err := relay.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.SetApplied(sluice.Position{File: files[3], Pos: 4})
	r, err := l.NewReader(sluice.Position{File: files[1], Pos: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := l.Purge(time.Now()); err != nil || len(removed) != 1 || removed[0] != files[0] {
		t.Fatalf("with a reader on %s, purge removed %v (%v), want %s", files[1], removed, err, files[0])
	}
	r.Close()
	if removed, err := l.Purge(time.Now()); err != nil || len(removed) != 1 || removed[0] != files[1] {
		t.Fatalf("purge removed %v (%v), want %s: the last two files fit", removed, err, files[1])
	}
	if removed, err := l.Purge(time.Now()); err != nil || len(removed) != 0 {
		t.Fatalf("purge of a relay that fits removed %v (%v)", removed, err)
	}
}
