package binlog_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

var src *sandbox.Instance

func TestMain(m *testing.M) { os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &src})) }

func config(inst *sandbox.Instance) binlog.Config {
	c := binlog.DefaultConfig(inst.Endpoint())
	c.Flavor = "mariadb"
	c.Heartbeat = 200 * time.Millisecond
	c.MinBackoff = 50 * time.Millisecond
	c.MaxBackoff = 500 * time.Millisecond
	return c
}

func masterStatus(t *testing.T, db *sql.DB) sluice.Position {
	return sandboxtest.MasterStatusGTID(t, db)
}

func TestCheckRefusesUnsupportedSettings(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	ctx := context.Background()
	info, err := binlog.Check(ctx, config(src))
	if err != nil {
		t.Fatalf("check on a good source: %v", err)
	}
	if info.Flavor != "mariadb" || len(info.Files) == 0 {
		t.Fatalf("info = %+v", info)
	}
	cfg := config(src)
	cfg.Flavor = ""
	if info, err := binlog.Check(ctx, cfg); err != nil || info.Flavor != "mariadb" {
		t.Fatalf("flavor detection: %+v %v", info, err)
	}
	for _, c := range []struct{ set, reset, want string }{
		{"SET GLOBAL binlog_format='STATEMENT'", "SET GLOBAL binlog_format='ROW'", "binlog_format"},
		{"SET GLOBAL binlog_format='MIXED'", "SET GLOBAL binlog_format='ROW'", "binlog_format"},
		{"SET GLOBAL binlog_row_image='MINIMAL'", "SET GLOBAL binlog_row_image='FULL'", "binlog_row_image"},
		{"SET GLOBAL binlog_row_image='NOBLOB'", "SET GLOBAL binlog_row_image='FULL'", "binlog_row_image"},
	} {
		sandboxtest.MustExec(t, db, c.set)
		_, err := binlog.Check(ctx, config(src))
		sandboxtest.MustExec(t, db, c.reset)
		var se *sluice.Error
		if !errors.Is(err, sluice.ErrBinlogFormat) || !errors.As(err, &se) || se.Hint == "" {
			t.Fatalf("%s: want ErrBinlogFormat with a hint, got %v", c.set, err)
		}
		if !contains(err.Error(), c.want) || !contains(err.Error(), "SET GLOBAL") {
			t.Fatalf("%s: message does not name the setting and the fix: %v", c.set, err)
		}
	}
}

func TestCheckRefusesMissingPrivilege(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "CREATE USER IF NOT EXISTS 'norepl'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT ON *.* TO 'norepl'@'127.0.0.1'")
	cfg := config(src)
	cfg.Source.User, cfg.Source.Password = "norepl", "pw"
	_, err := binlog.Check(context.Background(), cfg)
	if !errors.Is(err, sluice.ErrPrivilege) || !contains(err.Error(), "GRANT REPLICATION SLAVE") {
		t.Fatalf("want ErrPrivilege naming the grant, got %v", err)
	}
	// The repl user the sandbox creates has what sluice needs.
	cfg.Source.User, cfg.Source.Password = "repl", "repl"
	if _, err := binlog.Check(context.Background(), cfg); err != nil {
		t.Fatalf("repl user: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// collect reads events until the reader has passed until (file, pos).
func collect(t *testing.T, r *binlog.Reader, until sluice.Position) []*replication.BinlogEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var evs []*replication.BinlogEvent
	var at sluice.Position
	for {
		if at.Compare(until) >= 0 {
			return evs
		}
		ev, err := r.GetEvent(ctx)
		if err != nil {
			t.Fatalf("after %d events at %s: %v", len(evs), at, err)
		}
		if re, ok := ev.Event.(*replication.RotateEvent); ok {
			at = sluice.Position{File: string(re.NextLogName), Pos: uint32(re.Position)}
		} else if ev.Header.LogPos > 0 && ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 {
			at.Pos = ev.Header.LogPos
		}
		evs = append(evs, ev)
	}
}

func TestReaderStreamsAndResolvesGTID(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE IF NOT EXISTS s1", "CREATE TABLE s1.t (id int primary key, v varchar(20))",
		"INSERT INTO s1.t VALUES (1,'a')")
	mid := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "INSERT INTO s1.t VALUES (2,'b')", "FLUSH BINARY LOGS", "INSERT INTO s1.t VALUES (3,'c')")
	end := masterStatus(t, db)

	pos, err := binlog.ResolveGTID(context.Background(), config(src), mid.GTIDSet)
	if err != nil {
		t.Fatal(err)
	}
	if pos.File != mid.File || pos.Pos != mid.Pos {
		t.Fatalf("ResolveGTID(%s) = %s, want %s:%d", mid.GTIDSet, pos, mid.File, mid.Pos)
	}
	// At the very end, the resolved position is the end of the binlog.
	// (MariaDB may have written a Binlog_checkpoint event after the last
	// transaction: the resolved position may be just before it.)
	if pos, err := binlog.ResolveGTID(context.Background(), config(src), end.GTIDSet); err != nil || pos.File != end.File || pos.Pos > end.Pos || pos.Pos+64 < end.Pos {
		t.Fatalf("ResolveGTID(end) = %v, %v; want %s:%d", pos, err, end.File, end.Pos)
	}

	r, err := binlog.NewReader(config(src))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background(), sluice.Position{File: mid.File, Pos: mid.Pos}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, r, end)
	rows := 0
	for _, ev := range evs {
		if ev.Header.EventType == replication.WRITE_ROWS_EVENTv1 {
			rows++
		}
		if len(ev.RawData) != int(ev.Header.EventSize) {
			t.Fatalf("raw data of %s is %d bytes, header says %d", ev.Header.EventType, len(ev.RawData), ev.Header.EventSize)
		}
	}
	if rows != 2 {
		t.Fatalf("saw %d row events after %s, want 2 (rows 2 and 3)", rows, mid)
	}
}

func TestReaderReconnectsAfterKillAndRestart(t *testing.T) {
	inst := sandboxtest.Start(t, "rsrc")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE r", "CREATE TABLE r.t (id int primary key)")
	start := masterStatus(t, db)
	cfg := config(inst)
	var mu sync.Mutex
	var notes []string
	cfg.Notify = func(format string, args ...any) {
		mu.Lock()
		notes = append(notes, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background(), sluice.Position{File: start.File, Pos: start.Pos}); err != nil {
		t.Fatal(err)
	}
	countRows := func(evs []*replication.BinlogEvent) int {
		n := 0
		for _, ev := range evs {
			if ev.Header.EventType == replication.WRITE_ROWS_EVENTv1 {
				n++
			}
		}
		return n
	}
	sandboxtest.MustExec(t, db, "INSERT INTO r.t VALUES (1)")
	got := countRows(collect(t, r, masterStatus(t, db)))

	// Kill the dump thread: the reader must reconnect and continue.
	var id int64
	if err := db.QueryRow("SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, fmt.Sprintf("KILL %d", id), "INSERT INTO r.t VALUES (2)", "INSERT INTO r.t VALUES (3)")
	got += countRows(collect(t, r, masterStatus(t, db)))

	// Restart the server: a new binlog file; the reader follows.
	mu.Lock()
	beforeRestart := len(notes)
	mu.Unlock()
	if err := inst.Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Up(t, inst)
	db2 := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db2, "INSERT INTO r.t VALUES (4)")
	got += countRows(collect(t, r, masterStatus(t, db2)))
	if got != 4 {
		t.Fatalf("saw %d row events across a kill and a restart, want 4", got)
	}
	if n, _ := r.Reconnects(); n < 2 {
		t.Fatalf("reconnects = %d, want at least 2", n)
	}
	// Each lost connection and each reconnect was logged, with its reason.
	mu.Lock()
	defer mu.Unlock()
	lost, back := 0, 0
	for _, n := range notes {
		if strings.Contains(n, "connection to the source lost at") {
			lost++
		}
		if strings.Contains(n, "reconnected to the source at") {
			back++
		}
	}
	if lost < 2 || back < 2 {
		t.Fatalf("logged %d lost connections and %d reconnects, want 2 each:\n%s", lost, back, strings.Join(notes, "\n"))
	}
	// A planned restart is no sign of another replica with our server-id.
	for _, n := range notes[beforeRestart:] {
		if strings.Contains(n, "server-id") {
			t.Errorf("after a planned restart the note suggests a duplicate server-id: %s", n)
		}
	}
}

// TestReconnectNamesDuplicateServerID: a second reader with the same
// server id makes the source end the first one's dump; only then does
// the reconnect note name the server-id.
func TestReconnectNamesDuplicateServerID(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	start := masterStatus(t, db)
	cfg := config(src)
	cfg.ServerID = 4100000123
	var mu sync.Mutex
	var notes []string
	cfg.Notify = func(format string, args ...any) {
		mu.Lock()
		notes = append(notes, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	r1, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if err := r1.Start(context.Background(), sluice.Position{File: start.File, Pos: start.Pos}); err != nil {
		t.Fatal(err)
	}
	collect(t, r1, start)
	cfg2 := cfg
	cfg2.Notify = nil
	r2, err := binlog.NewReader(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(context.Background(), sluice.Position{File: start.File, Pos: start.Pos}); err != nil {
		t.Fatal(err)
	}
	// r1 is cut off; wait until it has reconnected once, then stop r2.
	sandboxtest.Eventually(t, time.Minute, "the first reader reconnected after losing its connection to the second", func() bool {
		n, _ := r1.Reconnects()
		return n >= 1
	})
	r2.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, n := range notes {
		if strings.Contains(n, "reconnected to the source") && strings.Contains(n, "server-id 4100000123") {
			return
		}
	}
	t.Fatalf("no reconnect note names the duplicate server-id:\n%s", strings.Join(notes, "\n"))
}

// TestReaderStartsWhileSourceIsDown: a source that goes down between
// Check and Start (a restart) is retried like any later reconnect, not
// reported as a failure of the task.
func TestReaderStartsWhileSourceIsDown(t *testing.T) {
	inst := sandboxtest.Start(t, "dsrc")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key)")
	start := masterStatus(t, db)
	if err := inst.Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	r, err := binlog.NewReader(config(inst))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background(), sluice.Position{File: start.File, Pos: start.Pos}); err != nil {
		t.Fatalf("Start with the source down: %v", err)
	}
	if _, last := r.Reconnects(); last == nil {
		t.Fatal("no failed connection recorded while the source was down")
	}
	sandboxtest.Up(t, inst)
	db2 := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db2, "INSERT INTO d.t VALUES (1)")
	n := 0
	for _, ev := range collect(t, r, masterStatus(t, db2)) {
		if ev.Header.EventType == replication.WRITE_ROWS_EVENTv1 {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("saw %d row events after the source came up, want 1", n)
	}
	if k, _ := r.Reconnects(); k < 1 {
		t.Fatalf("reconnects = %d, want at least 1", k)
	}
}

func TestPurgedPositionIsRefused(t *testing.T) {
	inst := sandboxtest.Start(t, "psrc")
	db := sandboxtest.MustOpen(t, inst, "")
	first := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "CREATE DATABASE p", "FLUSH BINARY LOGS", "CREATE TABLE p.t (id int primary key)", "FLUSH BINARY LOGS")
	now := masterStatus(t, db)
	// MariaDB keeps a file that InnoDB's crash recovery may still need
	// until its binlog checkpoint is written, and PURGE skips it silently;
	// repeat until every file before now.File is gone.
	for i := 0; ; i++ {
		sandboxtest.MustExec(t, db, "PURGE BINARY LOGS TO '"+now.File+"'")
		var oldest string
		var size any
		if err := db.QueryRow("SHOW BINARY LOGS").Scan(&oldest, &size); err != nil {
			t.Fatal(err)
		}
		if oldest == now.File {
			break
		}
		if i == 200 {
			t.Fatalf("PURGE BINARY LOGS TO %s keeps %s", now.File, oldest)
		}
		time.Sleep(50 * time.Millisecond)
	}

	info, err := binlog.Check(context.Background(), config(inst))
	if err != nil {
		t.Fatal(err)
	}
	if err := binlog.CheckPosition(info, sluice.Position{File: first.File, Pos: 4}, inst.Endpoint()); !errors.Is(err, sluice.ErrBinlogPurged) {
		t.Fatalf("CheckPosition on a purged file: %v", err)
	}
	if err := binlog.CheckPosition(info, now, inst.Endpoint()); err != nil {
		t.Fatalf("CheckPosition on the current file: %v", err)
	}
	r, err := binlog.NewReader(config(inst))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Start(context.Background(), sluice.Position{File: first.File, Pos: 4})
	if err == nil {
		_, err = r.GetEvent(context.Background())
	}
	if !errors.Is(err, sluice.ErrBinlogPurged) {
		t.Fatalf("reading a purged file: want ErrBinlogPurged, got %v", err)
	}
	// A GTID set from before the purge is refused as well.
	// (first.GTIDSet, or the first transaction's GTID on a sandbox that
	// had none: either continues in a purged file.)
	old := first.GTIDSet
	if old == "" {
		old = "0-" + fmt.Sprint(inst.ServerID) + "-1"
	}
	_, err = binlog.ResolveGTID(context.Background(), config(inst), old)
	if !errors.Is(err, sluice.ErrBinlogPurged) {
		t.Fatalf("resolving a purged GTID set: want ErrBinlogPurged, got %v", err)
	}
}

// TestReaderDetectsASilentSource: a source connection that stays open but
// carries nothing (toxiproxy's timeout toxic with no timeout drops every
// byte, heartbeats included) is declared dead after about ReadTimeout and
// the reader reconnects once the path is back, with no event lost. go-mysql
// sets no read deadline per packet any more; the reader's silence watch
// (silence.go) does this.
func TestReaderDetectsASilentSource(t *testing.T) {
	sandboxtest.SkipShort(t)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, "silent", "127.0.0.1:0", src.Endpoint().Addr())
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	host, port, _ := net.SplitHostPort(proxy.Listen)
	ep := src.Endpoint()
	ep.Host = host
	ep.Port, _ = strconv.Atoi(port)

	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE IF NOT EXISTS silent", "CREATE TABLE silent.t (id int primary key)")
	start := masterStatus(t, db)
	cfg := config(src)
	cfg.Source = ep
	cfg.ReadTimeout = time.Second
	lost := make(chan time.Time, 16)
	cfg.Notify = func(format string, args ...any) {
		if strings.Contains(fmt.Sprintf(format, args...), "connection to the source lost") {
			lost <- time.Now()
		}
	}
	r, err := binlog.NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background(), sluice.Position{File: start.File, Pos: start.Pos}); err != nil {
		t.Fatal(err)
	}
	rows := func(evs []*replication.BinlogEvent) int {
		n := 0
		for _, ev := range evs {
			if ev.Header.EventType == replication.WRITE_ROWS_EVENTv1 {
				n++
			}
		}
		return n
	}
	sandboxtest.MustExec(t, db, "INSERT INTO silent.t VALUES (1)")
	got := rows(collect(t, r, masterStatus(t, db)))

	// The stream is live (the row arrived): now silence it.
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"silence","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	silent := time.Now()
	var at time.Time
	select {
	case at = <-lost:
	case <-time.After(60 * time.Second):
		t.Fatal("a silent source was not detected within 60 s (read timeout 1 s)")
	}
	// The last heartbeat may have arrived up to one heartbeat before the
	// toxic: the silence began then.
	d := at.Sub(silent)
	t.Logf("silence detected after %v (read timeout %v)", d, cfg.ReadTimeout)
	if d < cfg.ReadTimeout-cfg.Heartbeat-50*time.Millisecond {
		t.Fatalf("the connection was declared dead %v after it went silent, before the read timeout %v", d, cfg.ReadTimeout)
	}
	if d > 3*cfg.ReadTimeout {
		t.Fatalf("the silent connection was declared dead only %v after it went silent (read timeout %v)", d, cfg.ReadTimeout)
	}
	if err := proxy.Toxics.RemoveToxic(context.Background(), "silence"); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, "INSERT INTO silent.t VALUES (2)", "INSERT INTO silent.t VALUES (3)")
	got += rows(collect(t, r, masterStatus(t, db)))
	if got != 3 {
		t.Fatalf("saw %d row events across the silence, want 3", got)
	}
	if n, _ := r.Reconnects(); n < 1 {
		t.Fatalf("reconnects = %d, want at least 1", n)
	}
}
