package serve_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/serve"
)

// heldLog is the relay as the service sees it, except that while held its
// end stays where it was: a relay that lags the source, placed exactly.
// (Not a mock of the relay: every other call is the real relay's.)
type heldLog struct {
	serve.Binlog
	mu   sync.Mutex
	held *sluice.Position
}

func (h *heldLog) End() sluice.Position {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held != nil {
		return *h.held
	}
	return h.Binlog.End()
}

func (h *heldLog) hold(p *sluice.Position) {
	h.mu.Lock()
	h.held = p
	h.mu.Unlock()
}

// serveWith serves b with cfg's Source/NoForward on a free port as repl.
func serveWith(t *testing.T, b serve.Binlog, cfg serve.Config) *sql.DB {
	t.Helper()
	password := "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.ServerID, cfg.Users = 999, []serve.User{{Name: "repl", Password: password}}
	s, err := serve.New(cfg, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { ln.Close(); s.Close() })
	db, err := sql.Open("mysql", "repl:"+password+"@tcp("+ln.Addr().String()+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// answer is a query's result as text: column names and database types,
// then rows (NULL as NULL), or its error.
func answer(db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string) string {
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	cts, _ := rows.ColumnTypes()
	var out []string
	for _, c := range cts {
		out = append(out, c.Name()+" "+c.DatabaseTypeName())
	}
	out = []string{"[" + strings.Join(out, ", ") + "]"}
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cts))
		ptrs := make([]any, len(cts))
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
				r = append(r, "'"+string(v)+"'")
			}
		}
		out = append(out, "("+strings.Join(r, ", ")+")")
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(out, " ")
}

// TestServeForwardsMetadataQueries: with a source, sluice serve answers
// the metadata queries of the allow-list exactly as the source does
// (columns, types, rows, NULLs), gives its own values for the variables
// of the binlog it serves, refuses writes and reads of user tables
// (which leave the source untouched), and under a forwarded FLUSH TABLES
// WITH READ LOCK answers SHOW MASTER STATUS only once its relay holds the
// source's position, so that the schema read under the lock matches the
// position. Without a source, and for a global binlog, the same queries
// get an error that says why.
func TestServeForwardsMetadataQueries(t *testing.T) {
	inst := sandboxtest.Start(t, "fwd")
	src := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE d DEFAULT CHARSET latin1",
		"CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20) DEFAULT NULL, n BIGINT UNSIGNED NOT NULL DEFAULT 7, KEY kv (v)) COMMENT 'c'",
		"CREATE VIEW d.vw AS SELECT id FROM d.t",
		"INSERT INTO d.t VALUES (1, NULL, 2)")
	start := masterStatus(t, src)
	l, wait := startRelay(t, inst, t.TempDir(), start)
	wait(start)
	held := &heldLog{Binlog: replicate.ServeLog(l)}
	db := serveWith(t, held, serve.Config{Source: replicate.ServeSource(inst.Endpoint())})

	for _, q := range []string{
		"SHOW DATABASES",
		"SHOW SCHEMAS LIKE 'd'",
		"SHOW FULL TABLES IN `d` where Table_Type = 'BASE TABLE'",
		"SHOW TABLES FROM d LIKE 'v%'",
		"SHOW CREATE TABLE `d`.`t`",
		"SHOW CREATE DATABASE d",
		"SHOW FULL COLUMNS FROM d.t",
		"SHOW INDEX FROM t IN d",
		"SHOW CHARACTER SET LIKE 'latin1'",
		"SHOW COLLATION LIKE 'utf8mb4_bin'",
		"SELECT schema_name, default_character_set_name, default_collation_name FROM information_schema.schemata ORDER BY schema_name",
		"SELECT column_name, column_default, is_nullable, character_set_name FROM information_schema.columns WHERE table_schema = 'd' AND table_name = 't' ORDER BY ordinal_position",
		"SELECT COUNT(*) FROM information_schema.tables t JOIN information_schema.schemata s ON t.table_schema = s.schema_name WHERE s.schema_name = 'd'",
		"SHOW VARIABLES WHERE Variable_name IN ('character_set_server','collation_server','init_connect')",
		"SET STATEMENT max_statement_time=600 FOR SHOW CREATE TABLE d.t",
	} {
		if a, b := answer(src, q), answer(db, q); a != b || strings.HasPrefix(a, "error") {
			t.Errorf("%s:\nsource: %.400s\nserve:  %.400s", q, a, b)
		}
	}
	// SHOW TABLE STATUS: the same tables, though the statistics move.
	if a, b := answer(src, "SHOW TABLE STATUS FROM d"), answer(db, "SHOW TABLE STATUS FROM d"); strings.HasPrefix(b, "error") || strings.Count(a, "(") != strings.Count(b, "(") {
		t.Errorf("SHOW TABLE STATUS:\nsource: %.300s\nserve:  %.300s", a, b)
	}

	// Variables: the service's own for the binlog it serves, the
	// source's for the rest.
	for q, want := range map[string]string{
		"SHOW GLOBAL VARIABLES LIKE 'server_id'":     "('server_id', '999')",
		"SHOW VARIABLES LIKE 'version'":              "('version', '" + serve.Version + "')",
		"SHOW VARIABLES LIKE 'character_set_server'": "('character_set_server', 'utf8mb4')",
		"SHOW VARIABLES LIKE 'innodb_page_size'":     "('innodb_page_size', '16384')",
	} {
		if got := answer(db, q); !strings.HasSuffix(got, want) {
			t.Errorf("%s = %s, want %s", q, got, want)
		}
	}
	if got := answer(db, "SHOW GRANTS"); !strings.Contains(got, "REPLICATION SLAVE") || strings.Contains(got, "SELECT") {
		t.Errorf("SHOW GRANTS = %s", got)
	}

	// Nothing that writes or reads user rows reaches the source.
	for _, q := range []string{
		"SELECT * FROM d.t",
		"SELECT id FROM information_schema.tables, d.t",
		"SELECT table_name FROM information_schema.tables WHERE table_schema IN (SELECT v FROM d.t)",
		"INSERT INTO d.t VALUES (2, 'x', 1)",
		"UPDATE d.t SET v = 'x'",
		"DELETE FROM d.t",
		"DROP DATABASE d",
		"CREATE TABLE d.x (a INT)",
		"TRUNCATE TABLE d.t",
		"SELECT SLEEP(0) FROM information_schema.tables",
		"SELECT info FROM information_schema.processlist",
		"SELECT trx_query FROM information_schema.innodb_trx",
		"SELECT * FROM information_schema.user_privileges",
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_name IN (SELECT id FROM information_schema.processlist)",
		"SELECT GET_LOCK('x', 0) FROM information_schema.schemata",
		"SELECT table_name FROM information_schema.tables INTO OUTFILE '/tmp/sluice-fwd'",
		"SELECT table_name FROM information_schema.tables FOR UPDATE",
		"SHOW CREATE TABLE d.t; DROP DATABASE d",
		"LOCK TABLES d.t WRITE",
		"FLUSH TABLES",
	} {
		if got := answer(db, q); !strings.HasPrefix(got, "error") {
			t.Errorf("%s was answered: %.200s", q, got)
		}
	}
	if got := answer(src, "SELECT COUNT(*), MAX(v) FROM d.t WHERE v IS NULL"); got != "[COUNT(*) BIGINT, MAX(v) VARCHAR] ('1', NULL)" {
		t.Errorf("d.t changed: %s", got)
	}
	if got := answer(src, "SHOW TABLES FROM d"); strings.Contains(got, "'x'") {
		t.Errorf("d.x created: %s", got)
	}

	// The lock: the relay lags (held at start) while the source moves on.
	sandboxtest.MustExec(t, src, "INSERT INTO d.t VALUES (2, 'two', 2)")
	moved := masterStatus(t, src)
	at := start
	held.hold(&at)
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"FLUSH TABLES WITH READ LOCK", "START TRANSACTION WITH CONSISTENT SNAPSHOT"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	type status struct {
		p   sluice.Position
		err error
	}
	got := make(chan status, 1)
	go func() {
		var s status
		var a, b any
		s.err = c.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&s.p.File, &s.p.Pos, &a, &b)
		got <- s
	}()
	wait(moved) // the relay holds the source's position; the service sees it once released
	held.hold(nil)
	s := <-got
	if s.err != nil || s.p.File != moved.File || s.p.Pos != moved.Pos {
		t.Errorf("SHOW MASTER STATUS under the lock = %s, %v; want the source's %s", s.p, s.err, moved)
	}
	// The source is locked until UNLOCK TABLES, which is forwarded.
	for _, q := range []string{"COMMIT", "UNLOCK TABLES"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := src.ExecContext(wctx, "INSERT INTO d.t VALUES (3, 'three', 3)"); err != nil {
		t.Fatalf("the source is still locked after UNLOCK TABLES through serve: %v", err)
	}

	// A source that cannot be reached: metadata queries fail saying so;
	// the variables are the service's own, so replicas still connect.
	down := serveWith(t, held, serve.Config{Source: &serve.Source{Dial: func(context.Context) (*client.Conn, error) {
		return nil, errors.New("dial tcp: connection refused")
	}}})
	if got := answer(down, "SHOW DATABASES"); !strings.Contains(got, "cannot reach its source") {
		t.Errorf("SHOW DATABASES with the source down = %s", got)
	}
	if got := answer(down, "SHOW VARIABLES WHERE Variable_name = 'server_id'"); !strings.HasSuffix(got, "('server_id', '999')") {
		t.Errorf("SHOW VARIABLES with the source down = %s", got)
	}

	// Without a source, and for a global binlog: an error that says why.
	none := serveWith(t, held, serve.Config{})
	global := serveWith(t, held, serve.Config{NoForward: "the global binlog of sources: merges several sources"})
	for d, want := range map[*sql.DB]string{none: "no source", global: "global binlog"} {
		if got := answer(d, "SHOW DATABASES"); !strings.Contains(got, want) {
			t.Errorf("SHOW DATABASES = %s, want an error with %q", got, want)
		}
		for _, q := range []string{"SHOW GLOBAL VARIABLES LIKE 'server_id'", "SHOW VARIABLES WHERE Variable_name IN ('server_id')"} {
			if got := answer(d, q); !strings.HasSuffix(got, "('server_id', '999')") {
				t.Errorf("%s = %s", q, got)
			}
		}
		for _, q := range []string{"ROLLBACK", "UNLOCK TABLES"} {
			if _, err := d.Exec(q); err != nil {
				t.Errorf("%s with nothing to end: %v", q, err)
			}
		}
	}
}
