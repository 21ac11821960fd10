package replicate_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
)

// TiDB as a target (issue 32). The first run on a machine builds
// tidb-server (sandboxtest.StartTiDB).

func tidbTaskYAML(name, stateDir string, src *sandbox.Instance, dst *sandbox.TiDB) string {
	return fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["%s.*"]}
dir: %s
incremental:
  worker-count: 4
  batch: 20
  relay-sync: commit
  metrics-addr: "127.0.0.1:0"
`, name, src.Port, dst.Port, name, stateDir)
}

// tidbTypesDDL is a table of the types a MariaDB source commonly holds,
// all of which TiDB holds byte for byte.
const tidbTypesDDL = `CREATE TABLE %s.types (
	id INT PRIMARY KEY,
	vc VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
	ci VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci,
	l1 VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin,
	bn VARBINARY(16),
	bl BLOB,
	tx TEXT,
	d DECIMAL(20,6),
	f DOUBLE,
	dt DATETIME(6),
	ts TIMESTAMP(3) NULL,
	dd DATE,
	y YEAR,
	e ENUM('a','b','c'),
	s SET('x','y','z'),
	b BIT(10),
	u BIGINT UNSIGNED,
	KEY (ci)
) DEFAULT CHARSET=utf8mb4`

func tidbTypesRow(rng *rand.Rand, id int) string {
	str := func(n int) string {
		const alphabet = "abcXYZ019 _-éü€ñ"
		r := []rune(alphabet)
		var b strings.Builder
		for i := rng.Intn(n); i > 0; i-- {
			b.WriteRune(r[rng.Intn(len(r))])
		}
		return b.String()
	}
	null := func(v string) string {
		if rng.Intn(8) == 0 {
			return "NULL"
		}
		return v
	}
	l1 := []string{"abc", "caf\xe9", "na\xefve", ""}[rng.Intn(4)]
	return fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", id,
		null(fmt.Sprintf("'%s'", str(40))), null(fmt.Sprintf("'%s'", str(40))),
		null(fmt.Sprintf("_binary X'%x'", l1)), null(fmt.Sprintf("0x%x", rng.Int63())), null(fmt.Sprintf("REPEAT(0x%02x, %d)", rng.Intn(256), rng.Intn(3000))),
		null(fmt.Sprintf("'%s'", str(200))), null(fmt.Sprintf("%d.%06d", rng.Intn(1e9)-5e8, rng.Intn(1e6))),
		null(fmt.Sprintf("%d.%d", rng.Intn(1e6), rng.Intn(1e3))), null(fmt.Sprintf("'20%02d-%02d-%02d 12:34:56.%06d'", rng.Intn(30), 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(1e6))),
		null(fmt.Sprintf("'2020-01-%02d 01:02:03.%03d'", 1+rng.Intn(28), rng.Intn(1000))), null(fmt.Sprintf("'19%02d-01-01'", rng.Intn(100))),
		null(fmt.Sprint(1901+rng.Intn(200))), null(fmt.Sprintf("'%c'", 'a'+rng.Intn(3))), null([]string{"''", "'x'", "'y,z'", "'x,y,z'"}[rng.Intn(4)]),
		null(fmt.Sprintf("b'%b'", rng.Intn(1024))), null(fmt.Sprint(rng.Uint64())))
}

// hexDump is every row of schema.table as text, each column as HEX() of its
// stored bytes (strings) or of its text form (numbers, temporals), in key
// order (all columns for a table without a key).
func hexDump(t *testing.T, db *sql.DB, cols []tidbCol, schema, table string, order string) []string {
	t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		switch c.typ {
		case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "enum", "set":
			exprs[i] = "HEX(" + sluice.QuoteIdent(c.name) + ")"
		case "bit":
			exprs[i] = "HEX(" + sluice.QuoteIdent(c.name) + "+0)"
		default:
			exprs[i] = "HEX(CAST(" + sluice.QuoteIdent(c.name) + " AS CHAR))"
		}
	}
	rows, err := db.Query(fmt.Sprintf("SELECT %s FROM %s.%s ORDER BY %s", strings.Join(exprs, ", "), schema, table, order))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type tidbCol struct{ name, typ string }

// sameHex compares every table of schema row by row by HEX() of each
// column, on the source and the TiDB target.
func sameHex(t *testing.T, src, dst *sql.DB, schema string) {
	t.Helper()
	rows, err := src.Query("SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION", schema)
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string][]tidbCol{}
	pk := map[string][]string{}
	var names []string
	for rows.Next() {
		var tbl, name, typ, key string
		if err := rows.Scan(&tbl, &name, &typ, &key); err != nil {
			t.Fatal(err)
		}
		if cols[tbl] == nil {
			names = append(names, tbl)
		}
		cols[tbl] = append(cols[tbl], tidbCol{name, typ})
		if key == "PRI" {
			pk[tbl] = append(pk[tbl], sluice.QuoteIdent(name))
		}
	}
	rows.Close()
	for _, tbl := range names {
		order := strings.Join(pk[tbl], ", ")
		if order == "" {
			var all []string
			for i := range cols[tbl] {
				all = append(all, fmt.Sprint(i+1))
			}
			order = strings.Join(all, ", ")
		}
		a, b := hexDump(t, src, cols[tbl], schema, tbl, order), hexDump(t, dst, cols[tbl], schema, tbl, order)
		if len(a) != len(b) {
			t.Fatalf("%s.%s: %d rows on the source, %d on TiDB", schema, tbl, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s.%s row %d differs:\nsource %s\ntidb   %s", schema, tbl, i, a[i], b[i])
			}
		}
		t.Logf("%s.%s: %d rows equal by HEX()", schema, tbl, len(a))
	}
}

// TestTiDBTargetCopyAndReplication copies a MariaDB schema into TiDB and
// replicates into it under a write load, with one kill -9 of sluice during
// replication, and compares both sides row by row by HEX() of every column.
func TestTiDBTargetCopyAndReplication(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	tdb := sandboxtest.StartTiDB(t)
	bin := sandboxtest.BuildSluice(t)
	seed := sandboxtest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	const schema = "tidbk"
	src := sandboxtest.MustOpen(t, srcInst, "")
	sandboxtest.MustExec(t, src, "CREATE DATABASE "+schema, fmt.Sprintf(tidbTypesDDL, schema),
		"CREATE TABLE "+schema+".nokey (a INT, b VARCHAR(64))")
	for i := 0; i < 400; i += 50 {
		var vals []string
		for j := i; j < i+50; j++ {
			vals = append(vals, tidbTypesRow(rng, j))
		}
		sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".types VALUES "+strings.Join(vals, ", "))
	}
	sb := func(args ...string) *exec.Cmd {
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", srcInst.Port),
			"--mysql-user=root", "--mysql-db=" + schema, "--tables=2", "--table-size=2000", "--db-ps-mode=disable"}
		return exec.Command("sysbench", append(base, args...)...)
	}
	if out, err := sb("prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	dir := t.TempDir()
	stateDir, taskFile := filepath.Join(dir, "state"), filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(tidbTaskYAML(schema, stateDir, srcInst, tdb)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", "--config", taskFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TiDB v8.4") {
		t.Fatalf("sluice check against TiDB: %v:\n%s", err, out)
	}

	// Writes on the source for the whole copy and the kill.
	ctx, stopLoad := context.WithCancel(context.Background())
	var sbDone, insDone sync.WaitGroup
	var sbErr error
	sbDone.Add(1)
	insDone.Add(1)
	go func() {
		defer sbDone.Done()
		out, err := sb("run", "--threads=2", "--time=15", "--rate=100").CombinedOutput()
		if err != nil {
			sbErr = fmt.Errorf("sysbench run: %v: %s", err, out)
		}
	}()
	go func() {
		defer insDone.Done()
		w := rand.New(rand.NewSource(seed + 1))
		for i := 1000; ctx.Err() == nil; i++ {
			q := []string{
				fmt.Sprintf("INSERT INTO %s.nokey VALUES (%d, 'row %d')", schema, i%10, i),
				"INSERT INTO " + schema + ".types VALUES " + tidbTypesRow(w, i),
				// LEFT keeps vc within its column (a row updated many times
				// grew past it: 1406 on the source, seed 1795866425685268987).
				fmt.Sprintf("UPDATE %s.types SET vc = LEFT(CONCAT(IFNULL(vc, ''), 'é'), 40), d = d + 1, b = b ^ 1 WHERE id = %d", schema, w.Intn(400)),
				fmt.Sprintf("DELETE FROM %s.types WHERE id = %d", schema, w.Intn(i)),
			}[i%4]
			if _, err := src.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	startSluice := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "all")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, exited
	}
	// The kill lands once replication has committed 1 to 3 checkpoints of
	// its own, by the status file, never by time.
	cmd, exited := startSluice()
	var last sluice.Position
	for moves, limit := 1+rng.Intn(3), time.Now().Add(10*time.Minute); moves > 0; {
		if st, err := replicate.ReadStatus(stateDir); err == nil && st.PID == cmd.Process.Pid && st.Applied.File != "" && st.Applied != last {
			last = st.Applied
			moves--
			continue
		}
		if time.Now().After(limit) {
			_ = cmd.Process.Kill()
			t.Fatalf("sluice applied nothing for 10 minutes; log:\n%s", tail(logPath))
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited before the kill (%v); log:\n%s", err, tail(logPath))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	t.Logf("killed at applied %s", last)
	cmd, exited = startSluice()
	sbDone.Wait()
	stopLoad()
	insDone.Wait()
	if sbErr != nil {
		t.Fatal(sbErr)
	}
	end := masterStatus(t, src)
	for limit := time.Now().Add(10 * time.Minute); ; {
		if s, err := replicate.ReadStatus(stateDir); err == nil && s.PID == cmd.Process.Pid && after(s.Applied, end) {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("sluice did not catch up in 10 minutes; log:\n%s", tail(logPath))
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited early (%v); log:\n%s", err, tail(logPath))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("sluice after SIGTERM: %v; log:\n%s", err, tail(logPath))
	}
	sameHex(t, src, sandboxtest.MustOpenTiDB(t, tdb, ""), schema)
}

// TestTiDBTargetRefusesAtCheck: tables TiDB cannot hold as the source has
// them make sluice check fail naming the table and the reason, and migrate
// refuses before it copies anything.
func TestTiDBTargetRefusesAtCheck(t *testing.T) {
	tdb := sandboxtest.StartTiDB(t)
	bin := sandboxtest.BuildSluice(t)
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpenTiDB(t, tdb, "")
	for _, c := range []struct{ name, ddl, want string }{
		{"geo", "CREATE TABLE %s.geo (id INT PRIMARY KEY, p POINT)", "column p is POINT, a spatial type TiDB does not have"},
		{"ft", "CREATE TABLE %s.ft (id INT PRIMARY KEY, body TEXT, FULLTEXT KEY fb (body))", "index fb is a FULLTEXT index"},
		{"coll", "CREATE TABLE %s.coll (id INT PRIMARY KEY, v VARCHAR(10) COLLATE utf8mb4_unicode_520_ci)", "collation utf8mb4_unicode_520_ci"},
		{"inet", "CREATE TABLE %s.inet (id INT PRIMARY KEY, a INET6)", "column a is INET6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := "tidbbad_" + c.name
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+schema, fmt.Sprintf(c.ddl, schema),
				"CREATE TABLE "+schema+".fine (id INT PRIMARY KEY)", "INSERT INTO "+schema+".fine VALUES (1)")
			dir := t.TempDir()
			taskFile := filepath.Join(dir, "task.yaml")
			if err := os.WriteFile(taskFile, []byte(tidbTaskYAML(schema, filepath.Join(dir, "state"), srcInst, tdb)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "check", "--config", taskFile, "--mode", "full").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "fail  target flavour") || !strings.Contains(string(out), schema+"."+c.name) || !strings.Contains(string(out), c.want) {
				t.Fatalf("sluice check: %v, want a failure naming %s.%s and %q:\n%s", err, schema, c.name, c.want, out)
			}
			out, err = exec.Command(bin, "migrate", "--config", taskFile, "--mode", "full").CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("migrate --mode full: %v, want the check's refusal:\n%s", err, out)
			}
			var n int
			if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ? OR SCHEMA_NAME LIKE 'sluice_check%'", schema).Scan(&n); err != nil || n != 0 {
				t.Fatalf("the refused copy made %d schemas on the target (%v)", n, err)
			}
		})
	}
}
