package verify_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/verify"
)

// One source and one target server are shared by every test; each test
// works in its own databases.
var srcInst, dstInst *sandbox.Instance

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "vsrc", Inst: &srcInst}, sandboxtest.Want{Name: "vdst", Inst: &dstInst}))
}

// setup runs the same statements on both servers, then the per-side ones.
func setup(t *testing.T, both []string, onSrc []string, onDst []string) {
	t.Helper()
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, both...)
	sandboxtest.MustExec(t, dst, both...)
	sandboxtest.MustExec(t, src, onSrc...)
	sandboxtest.MustExec(t, dst, onDst...)
}

func run(t *testing.T, cfg verify.Config, tables ...string) *verify.Report {
	t.Helper()
	rep, err := runErr(t, cfg, tables...)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(rep.Tables) != len(tables) {
		t.Fatalf("report has %d tables, want %d", len(rep.Tables), len(tables))
	}
	return rep
}

func runErr(t *testing.T, cfg verify.Config, tables ...string) (*verify.Report, error) {
	t.Helper()
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	var refs []sluice.TableRef
	for _, s := range tables {
		db, tb, _ := strings.Cut(s, ".")
		refs = append(refs, sluice.TableRef{Schema: db, Name: tb})
	}
	return verify.Run(context.Background(), cfg, src, dst, refs)
}

func diffStrings(r *verify.TableResult) []string {
	var out []string
	for _, d := range r.Diffs {
		out = append(out, d.String())
	}
	return out
}

func wantDiffs(t *testing.T, r *verify.TableResult, want ...string) {
	t.Helper()
	got := diffStrings(r)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s diffs:\n%s\nwant:\n%s", r.Source, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func wantCounts(t *testing.T, r *verify.TableResult, status verify.Status, missing, extra, different int64) {
	t.Helper()
	if r.Status != status || r.Missing != missing || r.Extra != extra || r.Different != different {
		t.Fatalf("%s: status %q missing %d extra %d different %d; want %q %d %d %d (detail %q)",
			r.Source, r.Status, r.Missing, r.Extra, r.Different, status, missing, extra, different, r.Detail)
	}
}

func small(threads, rowsPerChunk int) verify.Config {
	c := verify.DefaultConfig()
	c.Threads, c.RowsPerChunk = threads, rowsPerChunk
	return c
}

func TestEqualTablesAreEqual(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE eq",
		"CREATE TABLE eq.t (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO eq.t SELECT seq, CONCAT('v', seq) FROM eq.seq_1_to_1000",
		"CREATE TABLE eq.empty (id INT PRIMARY KEY)",
	}, nil, nil)
	rep := run(t, small(3, 100), "eq.t", "eq.empty")
	if !rep.Equal() || rep.Err() != nil {
		t.Fatalf("not equal: %v", rep.Err())
	}
	r := rep.Tables[0]
	if r.SourceRows != 1000 || r.TargetRows != 1000 || r.Chunks != 11 || r.DiffChunks != 0 {
		t.Fatalf("eq.t: rows %d/%d chunks %d diff chunks %d; want 1000/1000 11 0 (10 full ranges and the open end)", r.SourceRows, r.TargetRows, r.Chunks, r.DiffChunks)
	}
	if e := rep.Tables[1]; e.Status != verify.StatusEqual || e.Chunks != 1 {
		t.Fatalf("eq.empty: %+v", e)
	}
}

func TestChangedMissingExtraRows(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE cme",
		"CREATE TABLE cme.t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
		"INSERT INTO cme.t SELECT seq, CONCAT('v', seq), seq FROM cme.seq_1_to_1000",
	}, nil, []string{
		"UPDATE cme.t SET n = n + 1 WHERE id = 42",
		"DELETE FROM cme.t WHERE id = 500",
		"INSERT INTO cme.t VALUES (5000, 'x', 1), (0, 'before', 0)",
	})
	cfg := small(4, 100)
	cfg.Progress = &verify.Progress{}
	rep := run(t, cfg, "cme.t")
	r := rep.Tables[0]
	p := cfg.Progress
	if p.TablesPlanned.Load() != 1 || p.ChunksPlanned.Load() != 11 || p.Chunks.Load() != 11 || p.Rows.Load() != 1000 || p.DiffChunks.Load() != 3 {
		t.Fatalf("progress: tables %d chunks %d/%d rows %d diff chunks %d; want 1, 11/11, 1000, 3",
			p.TablesPlanned.Load(), p.Chunks.Load(), p.ChunksPlanned.Load(), p.Rows.Load(), p.DiffChunks.Load())
	}
	wantCounts(t, r, verify.StatusDifferent, 1, 2, 1)
	wantDiffs(t, r, "id=0: extra", "id=42: different", "id=500: missing", "id=5000: extra")
	if r.SourceRows != 1000 || r.TargetRows != 1001 || r.DiffChunks != 3 {
		t.Fatalf("rows %d/%d diff chunks %d; want 1000/1001 3", r.SourceRows, r.TargetRows, r.DiffChunks)
	}
	err := rep.Err()
	var se *sluice.Error
	if !errors.Is(err, sluice.ErrVerifyDifferent) || !errors.As(err, &se) {
		t.Fatalf("Err() = %v, want a *sluice.Error wrapping ErrVerifyDifferent", err)
	}
	if !strings.Contains(err.Error(), "cme.t (1 missing, 2 extra, 1 different)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Err() = %q", err)
	}
	var b strings.Builder
	if err := rep.WriteText(&b, 2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cme.t id=0: extra\n", "cme.t id=42: different\n", "cme.t: 2 more differing keys not shown\n", "1 of 1 tables differ"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "id=500") {
		t.Fatalf("text report shows more than 2 keys:\n%s", b.String())
	}
}

func TestMaxDiffsKeepsFirstKeysAndFullCounts(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE md",
		"CREATE TABLE md.t (id BIGINT UNSIGNED PRIMARY KEY, v INT)",
		"INSERT INTO md.t SELECT seq, seq FROM md.seq_1_to_2000",
	}, nil, []string{"DELETE FROM md.t WHERE id % 40 = 7"})
	cfg := small(4, 50)
	cfg.MaxDiffs = 5
	r := run(t, cfg, "md.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 50, 0, 0)
	wantDiffs(t, r, "id=7: missing", "id=47: missing", "id=87: missing", "id=127: missing", "id=167: missing")
	if r.DiffChunks != 40 || r.Chunks != 41 {
		t.Fatalf("chunks %d diff chunks %d; want 41 40", r.Chunks, r.DiffChunks)
	}
}

func TestCompositeKey(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE ck",
		"CREATE TABLE ck.t (s VARCHAR(10) NOT NULL, n INT NOT NULL, b VARBINARY(4) NOT NULL, v TEXT, PRIMARY KEY (s, n, b))",
		"INSERT INTO ck.t SELECT CONCAT('k', seq % 7), seq, UNHEX(HEX(seq % 3)), REPEAT('x', seq) FROM ck.seq_1_to_300",
	}, nil, []string{
		"UPDATE ck.t SET v = 'changed' WHERE s = 'k3' AND n = 10",
		"DELETE FROM ck.t WHERE s = 'k5' AND n = 12",
		"INSERT INTO ck.t VALUES ('k9 \"q\"', 1, 0x00ff, NULL)",
	})
	r := run(t, small(2, 40), "ck.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 1, 1, 1)
	wantDiffs(t, r, `s="k3",n=10,b=0x01: different`, `s="k5",n=12,b=0x00: missing`, `s="k9 \"q\"",n=1,b=0x00ff: extra`)
	if strings.Join(r.KeyColumns, ",") != "s,n,b" {
		t.Fatalf("key columns %v", r.KeyColumns)
	}
}

func TestNullEmptyAndValueBoundaries(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE ne",
		"CREATE TABLE ne.t (id INT PRIMARY KEY, a VARCHAR(10), b VARCHAR(10), c TEXT, d VARBINARY(10))",
		"INSERT INTO ne.t VALUES (1, NULL, 'x', NULL, NULL), (2, 'a#', 'b', 'c', 'd'), (3, 'N', NULL, '', ''), (4, '', '', 'same', 'same')",
	}, []string{}, []string{
		"UPDATE ne.t SET a = '' WHERE id = 1",            // NULL -> ''
		"UPDATE ne.t SET a = 'a', b = '#b' WHERE id = 2", // same CONCAT_WS('#') text
		"UPDATE ne.t SET a = NULL, b = 'N' WHERE id = 3", // NULL and 'N' swap columns
	})
	r := run(t, small(1, 10), "ne.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 0, 0, 3)
	wantDiffs(t, r, "id=1: different", "id=2: different", "id=3: different")

	// Each NULL-vs-empty change alone, in text, blob and binary columns.
	for i, col := range []string{"c", "d"} {
		db := fmt.Sprintf("ne%d", i)
		setup(t, []string{
			"CREATE DATABASE " + db,
			"CREATE TABLE " + db + ".t (id INT PRIMARY KEY, c TEXT, d BLOB)",
			"INSERT INTO " + db + ".t VALUES (1, NULL, NULL)",
		}, nil, []string{"UPDATE " + db + ".t SET " + col + " = ''"})
		r := run(t, small(1, 10), db+".t").Tables[0]
		wantCounts(t, r, verify.StatusDifferent, 0, 0, 1)
	}
}

func TestKeylessTableComparedAsMultiset(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE kl",
		"CREATE TABLE kl.same (a INT, b VARCHAR(10))",
		"INSERT INTO kl.same VALUES (1, 'x'), (1, 'x'), (2, NULL)",
		"CREATE TABLE kl.t (a INT, b VARCHAR(10))",
	}, []string{
		// X, X, Y on the source and Y, Z, Z on the target: equal counts, and
		// equal BIT_XOR checksums, since duplicates cancel under XOR.
		"INSERT INTO kl.t VALUES (1, 'x'), (1, 'x'), (2, 'y')",
	}, []string{
		"INSERT INTO kl.t VALUES (2, 'y'), (3, 'z'), (3, 'z')",
	})
	rep := run(t, small(2, 10), "kl.same", "kl.t")
	if r := rep.Tables[0]; !r.Equal() || r.SourceRows != 3 || r.KeyColumns != nil {
		t.Fatalf("kl.same: %+v", r)
	}
	r := rep.Tables[1]
	wantCounts(t, r, verify.StatusDifferent, 2, 2, 0)
	if r.SourceRows != 3 || r.TargetRows != 3 || !strings.Contains(r.Detail, "no key") {
		t.Fatalf("kl.t: %+v", r)
	}

	// Above the limit, the table is still reported different, without counts.
	cfg := small(1, 10)
	cfg.MaxKeylessRows = 2
	r = run(t, cfg, "kl.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 0, 0, 0)
	if !strings.Contains(r.Detail, "max-keyless-rows") {
		t.Fatalf("detail %q", r.Detail)
	}
}

func TestTypesCompareByCanonicalValue(t *testing.T) {
	sandboxtest.SkipShort(t)
	cols := `id INT PRIMARY KEY, f FLOAT, d DOUBLE, m DECIMAL(20,6), dt DATETIME(6), ts TIMESTAMP(3) NULL, y YEAR,
		bt BIT(10), e ENUM('a','b'), st SET('x','y'), j JSON, bl LONGBLOB, tx MEDIUMTEXT, g POINT, u BIGINT UNSIGNED`
	rows := `INSERT INTO %s.t VALUES
		(1, 3.14159, 1e300/3, 12345678901234.123456, '2024-02-29 23:59:59.999999', '2038-01-19 03:14:07.123', 2024,
		 b'1010101010', 'b', 'x,y', '{"k": [1, 2]}', REPEAT(x'00ff', 1000), REPEAT('ü', 5000), POINT(1, 2), 18446744073709551615),
		(2, -0.0001, -2.5e-300, 0, '1000-01-01', NULL, NULL, b'0', 'a', '', 'null', '', '', NULL, 0),
		(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`
	setup(t, []string{"CREATE DATABASE ty"}, []string{
		"CREATE TABLE ty.t (" + cols + ") CHARSET utf8mb4",
		fmt.Sprintf(rows, "ty"),
	}, []string{
		// The target stores text in another character set; the same
		// characters still compare equal.
		"CREATE TABLE ty.t (" + strings.ReplaceAll(cols, "MEDIUMTEXT", "MEDIUMTEXT CHARSET utf16") + ") CHARSET latin1",
		fmt.Sprintf(rows, "ty"),
		"CREATE TABLE ty.orig LIKE ty.t",
		"INSERT INTO ty.orig SELECT * FROM ty.t",
	})
	if r := run(t, small(1, 2), "ty.t").Tables[0]; !r.Equal() {
		t.Fatalf("same values: %+v", r)
	}
	for _, change := range []string{
		"UPDATE ty.t SET bl = CONCAT(bl, x'00') WHERE id = 1",
		"UPDATE ty.t SET f = 3.1416 WHERE id = 1",
		"UPDATE ty.t SET ts = '2038-01-19 03:14:07.124' WHERE id = 1",
		"UPDATE ty.t SET bt = b'1010101011' WHERE id = 1",
		"UPDATE ty.t SET g = POINT(2, 1) WHERE id = 1",
		"UPDATE ty.t SET tx = CONCAT(tx, 'a') WHERE id = 1",
	} {
		dst := sandboxtest.MustOpen(t, dstInst, "")
		sandboxtest.MustExec(t, dst, change)
		r := run(t, small(1, 2), "ty.t").Tables[0]
		sandboxtest.MustExec(t, dst, "REPLACE INTO ty.t SELECT * FROM ty.orig WHERE id = 1")
		if r.Status != verify.StatusDifferent || r.Different != 1 {
			t.Fatalf("after %q: %+v", change, r)
		}
	}
}

func TestRoutesMissingTargetAndColumns(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, nil, []string{
		"CREATE DATABASE rs",
		"CREATE TABLE rs.users (id INT PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO rs.users SELECT seq, CONCAT('u', seq) FROM rs.seq_1_to_100",
		"CREATE TABLE rs.gone (id INT PRIMARY KEY)",
		"INSERT INTO rs.gone VALUES (1), (2)",
		"CREATE TABLE rs.cols (id INT PRIMARY KEY, a INT, b INT)",
		"CREATE TABLE rs.gen (id INT PRIMARY KEY, a INT, g INT AS (a * 2) VIRTUAL)",
		"INSERT INTO rs.gen (id, a) SELECT seq, seq FROM rs.seq_1_to_20",
	}, []string{
		"CREATE DATABASE rt",
		"CREATE TABLE rt.people (id INT PRIMARY KEY, name VARCHAR(20))",
		"INSERT INTO rt.people SELECT seq, CONCAT('u', seq) FROM rt.seq_1_to_100",
		"UPDATE rt.people SET name = 'renamed' WHERE id = 7",
		"CREATE TABLE rt.cols (id INT PRIMARY KEY, a INT, c INT)",
		// A generated column is derived data: a different expression on the
		// target does not make the stored rows differ.
		"CREATE TABLE rt.gen (id INT PRIMARY KEY, a INT, g INT AS (a * 3) STORED)",
		"INSERT INTO rt.gen (id, a) SELECT seq, seq FROM rt.seq_1_to_20",
	})
	cfg := small(2, 30)
	cfg.Route = func(r sluice.TableRef) sluice.TableRef {
		r.Schema = "rt"
		if r.Name == "users" {
			r.Name = "people"
		}
		return r
	}
	rep := run(t, cfg, "rs.users", "rs.gone", "rs.cols", "rs.gen")
	users, gone, cols, gen := rep.Tables[0], rep.Tables[1], rep.Tables[2], rep.Tables[3]
	if users.Target != (sluice.TableRef{Schema: "rt", Name: "people"}) {
		t.Fatalf("route not applied: %v", users.Target)
	}
	wantCounts(t, users, verify.StatusDifferent, 0, 0, 1)
	wantDiffs(t, users, "id=7: different")
	if gone.Status != verify.StatusTargetMissing || gone.SourceRows != 2 || !strings.Contains(gone.Detail, "rt.gone") {
		t.Fatalf("rs.gone: %+v", gone)
	}
	if cols.Status != verify.StatusColumnsDiffer || cols.Detail != "target lacks column(s) b; target has extra column(s) c" {
		t.Fatalf("rs.cols: %+v", cols)
	}
	if !gen.Equal() || gen.SourceRows != 20 {
		t.Fatalf("rs.gen: %+v", gen)
	}
	if err := rep.Err(); !errors.Is(err, sluice.ErrVerifyDifferent) || !strings.Contains(err.Error(), "3 of 4 tables") {
		t.Fatalf("Err() = %v", err)
	}
}

func TestUnknownSourceTableIsAnError(t *testing.T) {
	sandboxtest.SkipShort(t)
	_, err := runErr(t, small(1, 10), "nosuchdb.t")
	if !errors.Is(err, sluice.ErrUnknownTable) {
		t.Fatalf("err = %v, want ErrUnknownTable", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := verify.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*verify.Config){
		"threads":          func(c *verify.Config) { c.Threads = 0 },
		"rows-per-chunk":   func(c *verify.Config) { c.RowsPerChunk = 0 },
		"max-diffs":        func(c *verify.Config) { c.MaxDiffs = -1 },
		"max-keyless-rows": func(c *verify.Config) { c.MaxKeylessRows = -1 },
		"rechecks":         func(c *verify.Config) { c.Rechecks = 101 },
		"recheck-delay":    func(c *verify.Config) { c.RecheckDelay = -1 },
	} {
		c := verify.DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate() = %v", name, err)
		}
		if _, err := verify.Run(context.Background(), c, nil, nil, nil); !errors.Is(err, sluice.ErrConfig) {
			t.Errorf("%s: Run() = %v", name, err)
		}
	}
}

func TestSchemaTables(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE st",
		"CREATE TABLE st.b (id INT PRIMARY KEY)",
		"CREATE TABLE st.a (id INT PRIMARY KEY)",
		"CREATE VIEW st.v AS SELECT id FROM st.a",
		"INSERT INTO st.a VALUES (1)",
	}, nil, nil)
	src := sandboxtest.MustOpen(t, srcInst, "")
	refs, err := verify.SchemaTables(context.Background(), src, "st")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(refs) != "[st.a st.b]" {
		t.Fatalf("tables %v, want [st.a st.b]", refs)
	}
	rep, err := verify.Run(context.Background(), verify.DefaultConfig(), src, sandboxtest.MustOpen(t, dstInst, ""), refs)
	if err != nil || !rep.Equal() {
		t.Fatalf("equal schema: %v %v", err, rep.Err())
	}
	if _, err := verify.SchemaTables(context.Background(), src, "st", "nosuch"); !errors.Is(err, sluice.ErrUnknownTable) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("unknown schema: %v", err)
	}
}

func TestRechecksLetAChangingPairSettle(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE rc",
		"CREATE TABLE rc.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO rc.t SELECT seq, seq FROM rc.seq_1_to_100",
	}, nil, []string{"DELETE FROM rc.t WHERE id IN (5, 95)"})
	dst := sandboxtest.MustOpen(t, dstInst, "")
	var mu sync.Mutex
	var points []string
	hook := func(fix string) func(string, sluice.TableRef, int) {
		return func(point string, ref sluice.TableRef, chunk int) {
			mu.Lock()
			defer mu.Unlock()
			points = append(points, fmt.Sprintf("%s %s %d", point, ref, chunk))
			if fix != "" && len(points) == 1 {
				sandboxtest.MustExec(t, dst, fix)
			}
		}
	}
	cfg := small(2, 50)
	cfg.Rechecks, cfg.RecheckDelay = 2, 0

	// Both differences persist: each chunk is checked three times, then
	// drilled into.
	verify.SetHook(&cfg, hook(""))
	r := run(t, cfg, "rc.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 2, 0, 0)
	wantDiffs(t, r, "id=5: missing", "id=95: missing")
	sort.Strings(points)
	if got := strings.Join(points, "; "); got != "drill rc.t 0; drill rc.t 1; recheck rc.t 0; recheck rc.t 0; recheck rc.t 1; recheck rc.t 1" {
		t.Fatalf("hook points: %s", got)
	}

	// A writer repairs id 95 before the first recheck: chunk 1 settles.
	sandboxtest.MustExec(t, dst, "INSERT INTO rc.t VALUES (5, 5)")
	points = nil
	verify.SetHook(&cfg, hook("INSERT INTO rc.t VALUES (95, 95)"))
	r = run(t, cfg, "rc.t").Tables[0]
	if !r.Equal() || r.TargetRows != 100 {
		t.Fatalf("after repair: %+v", r)
	}
	if len(points) != 1 || points[0] != "recheck rc.t 1" {
		t.Fatalf("hook points: %v", points)
	}

	// Without rechecks, a repair between checksum and drill-down leaves a
	// difference with no key to name, and the report says why.
	sandboxtest.MustExec(t, dst, "DELETE FROM rc.t WHERE id = 95")
	points = nil
	cfg.Rechecks = 0
	verify.SetHook(&cfg, hook("INSERT INTO rc.t VALUES (95, 95)"))
	r = run(t, cfg, "rc.t").Tables[0]
	wantCounts(t, r, verify.StatusDifferent, 0, 0, 0)
	if r.DiffChunks != 1 || !strings.Contains(r.Detail, "changing during verify") {
		t.Fatalf("transient difference: %+v", r)
	}
}

func TestUniqueKeyTableAndTextReport(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE uk",
		// No primary key: rows are identified by the NOT NULL unique key,
		// not by the nullable one.
		"CREATE TABLE uk.t (a INT NULL, code CHAR(8) NOT NULL, v INT, UNIQUE KEY (a), UNIQUE KEY (code))",
		"INSERT INTO uk.t SELECT seq, LPAD(seq, 8, '0'), seq FROM uk.seq_1_to_250",
	}, nil, []string{"UPDATE uk.t SET v = 0 WHERE code = '00000200'", "UPDATE uk.t SET a = NULL WHERE code = '00000003'"})
	rep := run(t, small(2, 20), "uk.t")
	r := rep.Tables[0]
	if strings.Join(r.KeyColumns, ",") != "code" || r.Chunks != 13 {
		t.Fatalf("key %v chunks %d; want code, 13", r.KeyColumns, r.Chunks)
	}
	wantCounts(t, r, verify.StatusDifferent, 0, 0, 2)
	wantDiffs(t, r, `code="00000003": different`, `code="00000200": different`)
	text := rep.String()
	if !strings.Contains(strings.Join(strings.Fields(text), " "), "uk.t = 250 250 13 2 2 different TOTAL (1 tables) 250 250 13 2 1 of 1 tables differ") ||
		!strings.Contains(text, "uk.t code=\"00000200\": different\n") {
		t.Fatalf("text report:\n%s", text)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := verify.Run(ctx, small(2, 10), sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, ""),
		[]sluice.TableRef{{Schema: "mysql", Name: "user"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestUnreadableTargetIsAnErrorNotAMissingTable(t *testing.T) {
	sandboxtest.SkipShort(t)
	setup(t, []string{
		"CREATE DATABASE pv",
		"CREATE TABLE pv.a (id INT PRIMARY KEY)",
		"CREATE TABLE pv.b (id INT PRIMARY KEY)",
	}, nil, []string{
		"CREATE USER 'pvuser'@'127.0.0.1'",
		"GRANT SELECT ON pv.a TO 'pvuser'@'127.0.0.1'",
	})
	dst, err := sql.Open("mysql", fmt.Sprintf("pvuser@tcp(127.0.0.1:%d)/", dstInst.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	src := sandboxtest.MustOpen(t, srcInst, "")
	refs := []sluice.TableRef{{Schema: "pv", Name: "a"}, {Schema: "pv", Name: "b"}}

	// pv.b exists on the target but pvuser cannot see it; information_schema
	// hides it, which must not pass for "missing on target".
	_, err = verify.Run(context.Background(), small(1, 10), src, dst, refs)
	var qe *verify.QueryError
	if !errors.As(err, &qe) || qe.Side != verify.Target || !strings.Contains(err.Error(), "pv.b") {
		t.Fatalf("err = %v, want a target QueryError naming pv.b", err)
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1142 {
		t.Fatalf("err = %v, want the server's privilege error 1142", err)
	}

	// A target schema that does not exist is a missing table, not an error.
	cfg := small(1, 10)
	cfg.Route = func(r sluice.TableRef) sluice.TableRef { r.Schema = "pv_nosuch"; return r }
	rep, err := verify.Run(context.Background(), cfg, src, sandboxtest.MustOpen(t, dstInst, ""), refs[:1])
	if err != nil || rep.Tables[0].Status != verify.StatusTargetMissing {
		t.Fatalf("missing schema: %v %+v", err, rep)
	}
}
