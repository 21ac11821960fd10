package load_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// One source and one target server and one sluice binary serve every test
// of the package; each test uses its own databases.
var (
	srcInst, dstInst *sandbox.Instance
	sluiceBin        string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if sandboxtest.Short() {
		return m.Run() // make test-unit: the tests that need the servers skip
	}
	var wg sync.WaitGroup
	var errs [3]error
	var stops [2]func()
	wg.Add(3)
	go func() { defer wg.Done(); srcInst, stops[0], errs[0] = sandboxtest.New("src") }()
	go func() { defer wg.Done(); dstInst, stops[1], errs[1] = sandboxtest.New("dst") }()
	binDir, err := os.MkdirTemp("", "sluicebin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(binDir)
	go func() {
		defer wg.Done()
		sluiceBin, errs[2] = sandboxtest.SluiceBinary(binDir)
	}()
	wg.Wait()
	for _, s := range stops {
		if s != nil {
			defer s()
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		fmt.Fprintln(os.Stderr, err, "(is mariadb-server installed? run 'make deps')")
		return 2
	}
	return m.Run()
}

// taskFile writes a task file for the shared sandboxes; extra is appended
// YAML (routes, sizes).
func taskFile(t *testing.T, name, include, extra string) string {
	t.Helper()
	body := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables:
  include: [%q]
%s
`, name, srcInst.Port, dstInst.Port, include, extra)
	p := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sluice runs the binary and returns stdout, stderr and the exit code.
func sluice(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// mustSluice runs the binary and fails the test unless it exits 0.
func mustSluice(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := sluice(t, args...)
	if code != 0 {
		t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// tableRows reads every row of a table as comparable text: each column's
// exact bytes in hex (FLOAT widened to DOUBLE, BIT as a number, so nothing
// is rounded for display), NULL as a distinct marker, rows sorted.
func tableRows(t *testing.T, db *sql.DB, schema, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, schema, table)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		e := "`" + name + "`"
		switch typ {
		case "float":
			e = "CAST(" + e + " AS DOUBLE)"
		case "bit", "year":
			e = "CAST(" + e + " AS UNSIGNED)"
		}
		exprs = append(exprs, "IFNULL(HEX(CAST("+e+" AS BINARY)), 'NULL')")
	}
	rows.Close()
	if len(exprs) == 0 {
		t.Fatalf("%s.%s has no columns", schema, table)
	}
	q := "SELECT CONCAT_WS('|', " + strings.Join(exprs, ", ") + ") FROM `" + schema + "`.`" + table + "`"
	rs, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var s string
		if err := rs.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// tableChecksum is CHECKSUM TABLE ... EXTENDED: the server's own digest of
// the stored rows, independent of how tableRows prints them.
func tableChecksum(t *testing.T, db *sql.DB, schema, table string) string {
	t.Helper()
	var name string
	var sum sql.NullInt64
	if err := db.QueryRow("CHECKSUM TABLE `"+schema+"`.`"+table+"` EXTENDED").Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(sum.Int64, sum.Valid)
}

// createBody is SHOW CREATE TABLE without the table name line.
func createBody(t *testing.T, db *sql.DB, schema, table string) string {
	t.Helper()
	var name, create string
	if err := db.QueryRow("SHOW CREATE TABLE `"+schema+"`.`"+table+"`").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(create, "\n")
	return body
}

// sameTables checks that every table of srcSchema has an identical
// definition and identical rows in dstSchema.
func sameTables(t *testing.T, src, dst *sql.DB, srcSchema, dstSchema string) {
	t.Helper()
	rows, err := src.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1", srcSchema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatalf("no tables in %s", srcSchema)
	}
	for _, tb := range tables {
		if a, b := createBody(t, src, srcSchema, tb), createBody(t, dst, dstSchema, tb); a != b {
			t.Errorf("%s: definitions differ:\nsource: %s\ntarget: %s", tb, a, b)
		}
		// MariaDB 10.11's CHECKSUM TABLE of a table with a generated column
		// changes with the table's state (a FLUSH TABLES, an ALTER of
		// another column) for the same rows, on one server alike: it cannot
		// judge such a table, and the HEX() rows below do.
		var gen int
		if err := src.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND EXTRA LIKE '%GENERATED%'", srcSchema, tb).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		if a, b := tableChecksum(t, src, srcSchema, tb), tableChecksum(t, dst, dstSchema, tb); a != b && gen == 0 {
			t.Errorf("%s: CHECKSUM TABLE differs: source %s, target %s", tb, a, b)
		}
		a, b := tableRows(t, src, srcSchema, tb), tableRows(t, dst, dstSchema, tb)
		if len(a) != len(b) {
			t.Errorf("%s: %d rows on the source, %d on the target", tb, len(a), len(b))
			continue
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s: row differs:\nsource: %s\ntarget: %s", tb, a[i], b[i])
			}
		}
	}
}
