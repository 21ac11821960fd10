// Package debezium runs Debezium's MariaDB connector (the embedded engine,
// jars from Maven Central) once against a MariaDB source and once against
// `sluice serve` copying that source's binlog, from the same position, and
// checks that both runs emit the same change events. It is a separate
// module so that nothing of Debezium's reaches sluice's go.mod; it needs a
// JDK (javac) and mvn, and runs in make test (not with -short).
package debezium

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/task"
)

// endTopic is the table whose first change event ends a run: the workload
// writes it last.
const endTopic = "dbz.dbzt.zz_end"

// enabled skips the Debezium tests only with -short. They run in make test
// (about 80 s with the jars cached): a machine without a JDK or mvn fails
// them with the fix (make deps installs both, as for the Kafka sandbox), so
// that CI on a new machine cannot pass by skipping them.
func enabled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts JVMs running Debezium against sluice serve")
	}
	for _, tool := range []string{"java", "javac", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: Debezium's tests need a JDK and mvn (fix: make deps, or apt-get install -y default-jdk-headless maven)", tool)
		}
	}
}

// startSource starts a MariaDB sandbox in a private directory. The nested
// module cannot use internal/sandboxtest, so this is its few lines.
func startSource(t *testing.T) *sandbox.Instance {
	t.Helper()
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := sandbox.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		c := sandbox.DefaultConfig()
		c.Dir, c.Name, c.Port, c.BufferPool = dir, "dbzsrc", port, "128M"
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		inst, err := sandbox.Up(ctx, c)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = inst.Stop(context.Background(), time.Minute) })
			return inst
		}
		lastErr = err
		_ = os.RemoveAll(filepath.Join(dir, c.Name))
	}
	t.Fatalf("start MariaDB sandbox: %v (is mariadb-server installed? run 'make deps')", lastErr)
	return nil
}

func masterStatus(t *testing.T, db *sql.DB) sluice.Position {
	t.Helper()
	var p sluice.Position
	var a, b any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&p.File, &p.Pos, &a, &b); err != nil {
		t.Fatal(err)
	}
	return p
}

// startServe runs what `sluice serve --config F` runs (replicate.RunServe on
// a parsed task file) for a pure binlog server of inst from start, on a
// free loopback port, until the test ends; wait blocks until the service
// reports (SHOW MASTER STATUS) that it holds pos. The service's log goes to
// logw.
func startServe(t *testing.T, inst *sandbox.Instance, start sluice.Position, logw io.Writer) (addr, password string, wait func(sluice.Position)) {
	t.Helper()
	password = "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("DBZ_SERVE_PW", password) // the task file names it; it is in no file
	cfg, err := task.Parse([]byte(fmt.Sprintf(`name: dbz
source: {host: 127.0.0.1, port: %d, user: root}
incremental: {binlog-file: %s, binlog-pos: %d}
dir: %s
serve: {listen: "127.0.0.1:0", server-id: 4444, users: [{user: repl, password: "${DBZ_SERVE_PW}"}]}
`, inst.Port, start.File, start.Pos, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrc := make(chan string, 1)
	go func() {
		done <- replicate.RunServe(ctx, cfg, logx.NewUntimed(logw, "serve "+cfg.Name), func(a string) { addrc <- a })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case addr = <-addrc:
	case err := <-done:
		done <- err
		t.Fatalf("sluice serve: %v", err)
	}
	db, err := sql.Open("mysql", "repl:"+password+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return addr, password, func(pos sluice.Position) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var at sluice.Position
			var a, b any
			err := db.QueryRow("SHOW MASTER STATUS").Scan(&at.File, &at.Pos, &a, &b)
			if err == nil && at.Compare(pos) >= 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sluice serve never reached %s (at %s, %v)", pos, at, err)
			}
			select {
			case err := <-done:
				done <- err
				t.Fatalf("sluice serve stopped before %s: %v", pos, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// workload writes DML over many column types, DDL in between, a
// multi-statement transaction, and last the end marker.
func workload(t *testing.T, db *sql.DB) { workloadWith(t, db, nil) }

// workloadWith is workload with extra statements right after the
// database's creation.
func workloadWith(t *testing.T, db *sql.DB, extra []string) {
	t.Helper()
	stmts := append([]string{"CREATE DATABASE dbzt"}, extra...)
	stmts = append(stmts, []string{
		`CREATE TABLE dbzt.typed (
		   id INT PRIMARY KEY,
		   i8 TINYINT, i64 BIGINT, u32 INT UNSIGNED, u64 BIGINT UNSIGNED,
		   dec1 DECIMAL(12,3), f FLOAT, d DOUBLE,
		   s VARCHAR(64) CHARACTER SET utf8mb4, c CHAR(3), txt TEXT, bin VARBINARY(16), bl BLOB,
		   dt DATETIME(3), ts TIMESTAMP(6) NULL, dd DATE, tm TIME(2), yr YEAR,
		   e ENUM('a','b','c'), st SET('x','y','z'), b5 BIT(5), j JSON
		 ) ENGINE=InnoDB`,
		`INSERT INTO dbzt.typed VALUES
		   (1, -5, -9000000000, 4000000000, 18446744073709551615, -12345.678, 1.5, 2.25,
		    'héllo ✓', 'abc', 'long text', X'00FF10', X'DEADBEEF',
		    '2024-02-29 23:59:58.123', '2024-03-01 01:02:03.456789', '1999-12-31', '-12:34:56.78', 2024,
		    'b', 'x,z', b'10101', '{"k": [1, 2, {"n": null}]}'),
		   (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
		"UPDATE dbzt.typed SET s = 'changed', dec1 = 0.001, j = JSON_SET(j, '$.k[0]', 7) WHERE id = 1",
		"UPDATE dbzt.typed SET id = 3 WHERE id = 2", // a key change: delete + tombstone + create
		"CREATE TABLE dbzt.nopk (a INT, b VARCHAR(10))",
		"INSERT INTO dbzt.nopk VALUES (1, 'one'), (1, 'one'), (2, 'two')",
		"DELETE FROM dbzt.nopk WHERE a = 1 LIMIT 1",
		"ALTER TABLE dbzt.typed ADD COLUMN added VARCHAR(20) DEFAULT 'dflt' AFTER id, DROP COLUMN c",
		"INSERT INTO dbzt.typed (id, s) VALUES (4, 'after ddl')",
		"UPDATE dbzt.typed SET added = 'set' WHERE id = 1",
		"DELETE FROM dbzt.typed WHERE id = 3",
	}...)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		if _, err := tx.Exec("INSERT INTO dbzt.typed (id, i64, s) VALUES (?, ?, ?)", i, i*i, fmt.Sprint("row ", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec("UPDATE dbzt.typed SET u32 = id WHERE id >= 10"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("DELETE FROM dbzt.nopk"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"TRUNCATE TABLE dbzt.nopk", "CREATE TABLE dbzt.zz_end (id INT PRIMARY KEY)", "INSERT INTO dbzt.zz_end VALUES (1)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// run runs Dbz against addr as user/password from start until it emits
// the end marker's event, and returns the events' JSON lines and its
// stderr.
func run(t *testing.T, classes, libs, addr, user, password string, start sluice.Position, gtids string) ([]string, string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Ddbz.host="+host, "-Ddbz.port="+port, "-Ddbz.user="+user,
		"-Ddbz.file="+start.File, "-Ddbz.pos="+strconv.FormatUint(uint64(start.Pos), 10),
		"-Ddbz.gtids="+gtids, "-Ddbz.databases=dbzt",
		"-cp", classes+string(os.PathListSeparator)+filepath.Join(libs, "*"), "Dbz")
	cmd.Env = append(os.Environ(), "DBZ_PASSWORD="+password) // not on the command line
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	sawEnd := false
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		var ev struct {
			Topic string `json:"topic"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("Dbz printed a line that is not JSON: %v: %.200s", err, line)
		}
		if ev.Topic == endTopic && !sawEnd {
			sawEnd = true
			stdin.Close() // Dbz stops once stdin is closed
		}
	}
	werr := cmd.Wait()
	t.Logf("Debezium against %s: %d events in %s", addr, len(lines), time.Since(t0).Round(time.Millisecond))
	if !sawEnd {
		t.Fatalf("Debezium against %s ended (%v) before the end marker, after %d events; its log:\n%s", addr, werr, len(lines), tail(stderr.String(), 60))
	}
	if werr != nil {
		t.Fatalf("Debezium against %s: %v; its log:\n%s", addr, werr, tail(stderr.String(), 60))
	}
	return lines, stderr.String()
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// lockedBuffer is the service's log, written by its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDebeziumSeesTheSameEvents: Debezium's MariaDB connector streaming
// from one binlog position emits, event by event, the same change events
// (keys, values with their schemas, schema changes) reading sluice serve as
// reading the source, once the fields that say when Debezium processed an
// event are taken out (normalize), and logs no warning reading the service
// that it does not log reading the source; resuming by file and position
// (subtest position) and by MariaDB GTID (subtest gtid, which needs the
// service's gtid_binlog_pos to be its GTID position, as the source's is).
func TestDebeziumSeesTheSameEvents(t *testing.T) {
	enabled(t)
	ctx := context.Background()
	t0 := time.Now()
	libs, err := fetchLibs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	classes := t.TempDir()
	if err := compile(ctx, libs, classes); err != nil {
		t.Fatal(err)
	}
	t.Logf("jars and javac: %s", time.Since(t0).Round(time.Millisecond))

	inst := startSource(t)
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One transaction before the start, so that the start has a GTID set
	// to resume from (the sandbox's own setup is not in its binlog).
	if _, err := db.Exec("CREATE DATABASE before_start"); err != nil {
		t.Fatal(err)
	}
	start := masterStatus(t, db)
	// The GTID set at the start, for the gtid subtest's offset.
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&start.GTIDSet); err != nil {
		t.Fatal(err)
	}
	workload(t, db)
	end := masterStatus(t, db)

	var serveLog lockedBuffer
	addr, password, wait := startServe(t, inst, start, &serveLog)
	defer func() {
		if t.Failed() {
			t.Logf("sluice serve's log:\n%s", tail(serveLog.String(), 40))
		}
	}()
	wait(end)

	// By position: the offset holds the file and position only. By GTID:
	// the offset holds the GTID set too, as the connector's own offsets
	// do after it ran, and it resumes by MariaDB GTID.
	for _, mode := range []struct{ name, gtids string }{{"position", ""}, {"gtid", start.GTIDSet}} {
		t.Run(mode.name, func(t *testing.T) {
			compareRuns(t, db, classes, libs, net.JoinHostPort(inst.Host(), strconv.Itoa(inst.Port)), addr, password, start, mode.gtids)
		})
	}
}

// compareRuns runs Debezium against the source (src) and against the
// service (served) from start and compares their events.
func compareRuns(t *testing.T, db *sql.DB, classes, libs, src, addr, password string, start sluice.Position, gtids string) {
	// The source's general log records every query Debezium sends; each is
	// then tried on the service, so that a failure below names the ones the
	// service does not answer alike.
	glog := filepath.Join(t.TempDir(), "general.log")
	for _, q := range []string{"SET GLOBAL general_log_file = '" + glog + "'", "SET GLOBAL general_log = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	direct, directLog := run(t, classes, libs, src, "root", "", start, gtids)
	if _, err := db.Exec("SET GLOBAL general_log = 0"); err != nil {
		t.Fatal(err)
	}
	queries := debeziumQueries(t, glog)
	diffs := compareOnServe(t, db, addr, password, queries)
	t.Logf("Debezium sent %d distinct queries to the source:\n  %s\nsluice serve answers %d of them differently:\n%s",
		len(queries), strings.Join(queries, "\n  "), len(diffs), strings.Join(diffs, "\n"))
	served, servedLog := run(t, classes, libs, addr, "repl", password, start, gtids)
	// Debezium must judge the service as it judges the source: a warning
	// or error it logs only against the service is a difference too (for
	// example "Last recorded offset is no longer available on the server",
	// which makes a connector in snapshot.mode=when_needed snapshot again).
	if extra := only(warnings(servedLog), warnings(directLog)); len(extra) > 0 {
		t.Errorf("Debezium warned only reading sluice serve:\n%s\nits GTID lines reading the source:\n%s\nreading sluice serve:\n%s",
			strings.Join(extra, "\n"), grepLines(directLog, "gtid"), grepLines(servedLog, "gtid"))
	}

	if d := os.Getenv("SLUICE_DEBEZIUM_KEEP"); d != "" {
		_ = os.WriteFile(filepath.Join(d, t.Name()[strings.LastIndex(t.Name(), "/")+1:]+"-source.jsonl"), []byte(strings.Join(direct, "\n")+"\n"), 0o644)
		_ = os.WriteFile(filepath.Join(d, t.Name()[strings.LastIndex(t.Name(), "/")+1:]+"-serve.jsonl"), []byte(strings.Join(served, "\n")+"\n"), 0o644)
	}
	// The source run itself must show what the workload wrote, so that two
	// equal runs cannot be two equally empty or broken ones.
	if got := summary(t, direct); got != wantSummary {
		t.Fatalf("Debezium reading the source emitted\n%s\nwant\n%s", got, wantSummary)
	}
	if len(direct) != len(served) {
		t.Errorf("Debezium emitted %d events reading the source, %d reading sluice serve", len(direct), len(served))
	}
	for i := 0; i < len(direct) && i < len(served); i++ {
		a, b := normalize(t, direct[i]), normalize(t, served[i])
		if a != b {
			t.Fatalf("event %d differs:\nsource: %s\nserve:  %s", i, a, b)
		}
	}
}

// debeziumQueries returns the distinct queries of the general log at
// path, in their first order, without the ones the test itself sent.
func debeziumQueries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		// "[date time]\t<id> Query\t<query>"
		i := strings.Index(l, " Query\t")
		if i < 0 {
			continue
		}
		q := strings.TrimSpace(l[i+len(" Query\t"):])
		if strings.HasPrefix(q, "SET GLOBAL general_log") || seen[q] {
			continue
		}
		seen[q] = true
		out = append(out, q)
	}
	return out
}

// compareOnServe sends each query to the source and to the service and
// returns, for each whose answer differs, both answers (or the error).
func compareOnServe(t *testing.T, src *sql.DB, addr, password string, queries []string) []string {
	t.Helper()
	db, err := sql.Open("mysql", "repl:"+password+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var diffs []string
	for _, q := range queries {
		a, b := answer(src, q), answer(db, q)
		if a != b {
			diffs = append(diffs, fmt.Sprintf("  %s\n    source: %.300s\n    serve:  %.300s", q, a, b))
		}
	}
	return diffs
}

// answer is a query's result as text: its rows, or its error.
func answer(db *sql.DB, q string) string {
	rows, err := db.Query(q)
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "error: " + err.Error()
		}
		var r []string
		for _, v := range vals {
			if v == nil {
				r = append(r, "NULL")
			} else {
				r = append(r, string(v))
			}
		}
		out = append(out, "("+strings.Join(r, ", ")+")")
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%d rows %s", len(out), strings.Join(out, " "))
}

// wantSummary is what the workload must make Debezium emit: per event,
// its table and op (c/u/d), "-" for a tombstone, or the DDL's first words.
const wantSummary = `DDL CREATE DATABASE dbzt
DDL CREATE TABLE dbzt.typed
typed c
typed c
typed u
typed d
typed -
typed c
DDL CREATE TABLE dbzt.nopk
nopk c
nopk c
nopk c
nopk d
nopk -
DDL ALTER TABLE dbzt.typed
typed c
typed u
typed d
typed -
typed c
typed c
typed c
typed c
typed c
typed c
typed c
typed c
typed c
typed c
typed u
typed u
typed u
typed u
typed u
typed u
typed u
typed u
typed u
typed u
nopk d
nopk -
nopk d
nopk -
DDL TRUNCATE TABLE dbzt.nopk
DDL CREATE TABLE dbzt.zz_end
zz_end c`

func summary(t *testing.T, lines []string) string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var ev struct {
			Topic string
			Value *struct {
				Payload struct {
					Op  string
					DDL string
				}
			}
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		table := ev.Topic[strings.LastIndex(ev.Topic, ".")+1:]
		switch {
		case ev.Value == nil:
			out = append(out, table+" -")
		case ev.Value.Payload.Op != "":
			out = append(out, table+" "+ev.Value.Payload.Op)
		default:
			f := strings.Fields(ev.Value.Payload.DDL)
			if len(f) > 3 {
				f = f[:3]
			}
			out = append(out, "DDL "+strings.Join(f, " "))
		}
	}
	return strings.Join(out, "\n")
}

// normalize removes from one event line the fields that must differ
// between two runs, and returns it re-encoded (keys sorted).
func normalize(t *testing.T, line string) string {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	if v, ok := ev["value"].(map[string]any); ok {
		if p, ok := v["payload"].(map[string]any); ok {
			// When Debezium processed the event (the envelope's own
			// clock), not when the source wrote it (source.ts_ms).
			delete(p, "ts_ms")
			delete(p, "ts_us")
			delete(p, "ts_ns")
			// A schema snapshot's events carry the snapshot's clock as
			// their source time (source.snapshot "true" or "last"); a
			// streamed event ("false") carries the binlog's, kept.
			if src, ok := p["source"].(map[string]any); ok {
				if sn, _ := src["snapshot"].(string); sn != "" && sn != "false" {
					delete(src, "ts_ms")
					delete(src, "ts_us")
					delete(src, "ts_ns")
				}
			}
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) && !strings.Contains(l, "BaseSourceTask -  ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var digits = regexp.MustCompile(`[0-9]+`)

// warnings are Debezium's WARN and ERROR log lines, without their thread
// and with numbers (ports, positions, GTIDs) blanked.
func warnings(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		i := strings.Index(l, " WARN ")
		if i < 0 {
			i = strings.Index(l, " ERROR ")
		}
		if i < 0 {
			continue
		}
		out = append(out, digits.ReplaceAllString(l[i+1:], "N"))
	}
	return out
}

// only returns the lines of a that b lacks.
func only(a, b []string) []string {
	in := map[string]bool{}
	for _, l := range b {
		in[l] = true
	}
	var out []string
	for _, l := range a {
		if !in[l] {
			out = append(out, l)
		}
	}
	return out
}
