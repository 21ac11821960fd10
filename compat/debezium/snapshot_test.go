package debezium

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// dbzRun is one Dbz process started by startDbz.
type dbzRun struct {
	t      *testing.T
	addr   string
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	t0     time.Time
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  []string
	sawEnd bool
	done   chan error
	cancel context.CancelFunc
}

func (r *dbzRun) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.Write(p)
}

func (r *dbzRun) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// startDbz starts Dbz against addr as a new connector (no offset) with
// snapshot.mode mode and a file schema history in a fresh file; its events
// are read until the end marker's (finish returns them).
func startDbz(t *testing.T, classes, libs, addr, user, password, mode, serverID string) *dbzRun {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	r := &dbzRun{t: t, addr: addr, done: make(chan error, 1), cancel: cancel}
	r.cmd = exec.CommandContext(ctx, "java", "-Xmx256m", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Ddbz.host="+host, "-Ddbz.port="+port, "-Ddbz.user="+user,
		"-Ddbz.snapshot-mode="+mode, "-Ddbz.server-id="+serverID, "-Ddbz.history="+filepath.Join(t.TempDir(), "history.dat"),
		"-Ddbz.databases=dbzt,dbzpre",
		"-cp", classes+string(os.PathListSeparator)+filepath.Join(libs, "*"), "Dbz")
	r.cmd.Env = append(os.Environ(), "DBZ_PASSWORD="+password) // not on the command line
	r.cmd.Stderr = r
	stdin, err := r.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdin = stdin
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.t0 = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Text()
			var ev struct {
				Topic string `json:"topic"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				r.done <- err
				return
			}
			r.mu.Lock()
			if !r.sawEnd { // what comes after the end marker is not compared
				r.lines = append(r.lines, line)
			}
			if ev.Topic == endTopic && !r.sawEnd {
				r.sawEnd = true
				stdin.Close() // Dbz stops once stdin is closed
			}
			r.mu.Unlock()
		}
		r.done <- r.cmd.Wait()
	}()
	return r
}

// waitSnapshot waits until the connector logged the end of its snapshot
// (the coordinator's "Snapshot ended with SnapshotResult [status=COMPLETED").
func (r *dbzRun) waitSnapshot() {
	r.t.Helper()
	for !strings.Contains(r.log(), "Snapshot ended with SnapshotResult [status=COMPLETED") {
		select {
		case err := <-r.done:
			r.done <- err
			r.t.Fatalf("Debezium against %s ended (%v) before its snapshot completed; its log:\n%s", r.addr, err, tail(r.log(), 60))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finish waits for the end marker's event and Dbz's exit, and returns the
// events and the log.
func (r *dbzRun) finish() ([]string, string) {
	r.t.Helper()
	defer r.cancel()
	err := <-r.done
	r.mu.Lock()
	lines, sawEnd := r.lines, r.sawEnd
	r.mu.Unlock()
	r.t.Logf("Debezium against %s: %d events in %s", r.addr, len(lines), time.Since(r.t0).Round(time.Millisecond))
	if !sawEnd {
		r.t.Fatalf("Debezium against %s ended (%v) before the end marker, after %d events:\n%s\nits log:\n%s", r.addr, err, len(lines), summary(r.t, lines), tail(r.log(), 60))
	}
	if err != nil {
		r.t.Fatalf("Debezium against %s: %v; its log:\n%s", r.addr, err, tail(r.log(), 60))
	}
	return lines, r.log()
}

// TestDebeziumSchemaSnapshot: a new connector with Debezium's file schema
// history and snapshot.mode=no_data reads the schema of the tables that
// exist when it starts (SHOW DATABASES, SHOW FULL TABLES, SHOW CREATE
// TABLE, ... which sluice serve forwards to its source) under its global
// read lock, takes its binlog position, and streams from there. Run against
// the source and against sluice serve side by side, then through a load
// with DML and DDL on a table created before the start (whose schema only
// the snapshot can give) and on new ones, both emit the same events: the
// snapshot's schema changes and every change after it.
func TestDebeziumSchemaSnapshot(t *testing.T) {
	enabled(t)
	ctx := context.Background()
	libs, err := fetchLibs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	classes := t.TempDir()
	if err := compile(ctx, libs, classes); err != nil {
		t.Fatal(err)
	}
	inst := startSource(t)
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE DATABASE dbzpre",
		"CREATE TABLE dbzpre.pre (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL DEFAULT 'x', n BIGINT UNSIGNED, d DECIMAL(8,2)) DEFAULT CHARSET=latin1",
		"INSERT INTO dbzpre.pre VALUES (1, 'one', 1, 1.5), (2, 'two', NULL, NULL)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	start := masterStatus(t, db)
	var serveLog lockedBuffer
	addr, password, wait := startServe(t, inst, start, &serveLog)
	defer func() {
		if t.Failed() {
			t.Logf("sluice serve's log:\n%s", tail(serveLog.String(), 40))
		}
	}()
	wait(start)

	glog := filepath.Join(t.TempDir(), "general.log")
	for _, q := range []string{"SET GLOBAL general_log_file = '" + glog + "'", "SET GLOBAL general_log = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	src := net.JoinHostPort(inst.Host(), strconv.Itoa(inst.Port))
	direct := startDbz(t, classes, libs, src, "root", "", "no_data", "5401")
	direct.waitSnapshot()
	if _, err := db.Exec("SET GLOBAL general_log = 0"); err != nil {
		t.Fatal(err)
	}
	queries := debeziumQueries(t, glog)
	// Replayed on a pool of its own: Debezium's queries include set
	// autocommit=0 and FLUSH TABLES WITH READ LOCK, which must not stay on
	// the connections the workload writes on (closing the pool ends them).
	replay, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	diffs := compareOnServe(t, replay, addr, password, queries)
	replay.Close()
	t.Logf("Debezium sent %d distinct queries to the source:\n  %s\nsluice serve answers %d of them differently:\n%s",
		len(queries), strings.Join(queries, "\n  "), len(diffs), strings.Join(diffs, "\n"))
	served := startDbz(t, classes, libs, addr, "repl", password, "no_data", "5402")
	served.waitSnapshot()

	// After both snapshots: changes to the table only the snapshot knows,
	// DDL on it, then the common workload.
	for _, q := range []string{
		"INSERT INTO dbzpre.pre VALUES (3, 'three', 3, 3.25)",
		"UPDATE dbzpre.pre SET v = 'uno', d = NULL WHERE id = 1",
		"ALTER TABLE dbzpre.pre ADD COLUMN extra VARCHAR(8) DEFAULT 'e' AFTER v, MODIFY n INT",
		"UPDATE dbzpre.pre SET n = -2 WHERE id = 2",
		"DELETE FROM dbzpre.pre WHERE id = 3",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	workload(t, db)
	directEvents, directLog := direct.finish()
	servedEvents, servedLog := served.finish()
	if extra := only(warnings(servedLog), warnings(directLog)); len(extra) > 0 {
		t.Errorf("Debezium warned only reading sluice serve:\n%s", strings.Join(extra, "\n"))
	}
	if d := os.Getenv("SLUICE_DEBEZIUM_KEEP"); d != "" {
		_ = os.WriteFile(filepath.Join(d, "snapshot-source.jsonl"), []byte(strings.Join(directEvents, "\n")+"\n"), 0o644)
		_ = os.WriteFile(filepath.Join(d, "snapshot-serve.jsonl"), []byte(strings.Join(servedEvents, "\n")+"\n"), 0o644)
	}
	if got, want := summary(t, directEvents), wantSnapshotSummary+"\n"+wantSummary; got != want {
		t.Fatalf("Debezium reading the source emitted\n%s\nwant\n%s", got, want)
	}
	if len(directEvents) != len(servedEvents) {
		t.Errorf("Debezium emitted %d events reading the source, %d reading sluice serve", len(directEvents), len(servedEvents))
	}
	for i := 0; i < len(directEvents) && i < len(servedEvents); i++ {
		a, b := normalize(t, directEvents[i]), normalize(t, servedEvents[i])
		if a != b {
			t.Fatalf("event %d differs:\nsource: %s\nserve:  %s", i, a, b)
		}
	}
}

// wantSnapshotSummary is what precedes the workload's events: the schema
// snapshot, then the changes to dbzpre.pre.
const wantSnapshotSummary = `DDL SET character_set_server=utf8mb4, collation_server=utf8mb4_general_ci
DDL DROP TABLE IF
DDL DROP DATABASE IF
DDL CREATE DATABASE ` + "`dbzpre`" + `
DDL USE ` + "`dbzpre`" + `
DDL CREATE TABLE ` + "`pre`" + `
pre c
pre u
DDL ALTER TABLE dbzpre.pre
pre u
pre d
pre -`
