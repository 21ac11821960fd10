package oltp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// recorder is an Executor that records statements instead of running them.
type recorder struct{ stmts []rec }

type rec struct {
	kind  Kind
	table int
	args  []any
}

func (r *recorder) Exec(_ context.Context, k Kind, table int, args ...any) error {
	r.stmts = append(r.stmts, rec{k, table, args})
	return nil
}

func (r *recorder) kinds() []Kind {
	out := make([]Kind, len(r.stmts))
	for i, s := range r.stmts {
		out[i] = s.kind
	}
	return out
}

func repeat(k Kind, n int) []Kind {
	out := make([]Kind, n)
	for i := range out {
		out[i] = k
	}
	return out
}

func seq(parts ...[]Kind) []Kind {
	var out []Kind
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(k ...Kind) []Kind { return k }

// TestStatementMix checks each workload's event against the statement
// sequence of sysbench 1.0.20's oltp_*.lua with the default options.
func TestStatementMix(t *testing.T) {
	ranges := one(SimpleRange, SumRange, OrderRange, DistinctRange)
	writes := one(IndexUpdate, NonIndexUpdate, Delete, Insert)
	want := map[string][]Kind{
		"point_select":     one(PointSelect),
		"read_only":        seq(one(Begin), repeat(PointSelect, 10), ranges, one(Commit)),
		"read_write":       seq(one(Begin), repeat(PointSelect, 10), ranges, writes, one(Commit)),
		"write_only":       seq(one(Begin), writes, one(Commit)),
		"update_index":     one(IndexUpdate),
		"update_non_index": one(NonIndexUpdate),
		"delete":           one(Delete),
		"insert":           one(InsertText),
	}
	if len(Names()) != len(want) {
		t.Fatalf("workloads %v, want the 8 of sysbench", Names())
	}
	for name, kinds := range want {
		w, err := Lookup("oltp_" + name)
		if err != nil {
			t.Fatal(err)
		}
		m := DefaultMix()
		m.Tables, m.TableSize = 4, 1000
		r := NewRand(DefaultDist(), 1)
		for ev := 0; ev < 200; ev++ {
			var x recorder
			if err := w.Event(context.Background(), &m, r, &x); err != nil {
				t.Fatal(err)
			}
			if got := x.kinds(); fmt.Sprint(got) != fmt.Sprint(kinds) {
				t.Fatalf("%s event = %v, want %v", name, got, kinds)
			}
			checkArgs(t, name, &m, x.stmts)
		}
		// Every statement the event runs is one the workload prepares.
		prepared := map[Kind]bool{Begin: true, Commit: true, InsertText: true}
		for _, k := range w.Kinds(DefaultMix()) {
			prepared[k] = true
		}
		for _, k := range kinds {
			if !prepared[k] {
				t.Errorf("%s runs %v but does not prepare it", name, k)
			}
		}
	}
}

var (
	cRe   = regexp.MustCompile(`^(\d{11}-){9}\d{11}$`)
	padRe = regexp.MustCompile(`^(\d{11}-){4}\d{11}$`)
)

func checkArgs(t *testing.T, name string, m *Mix, stmts []rec) {
	t.Helper()
	id := func(v any) int64 {
		n, ok := v.(int64)
		if !ok {
			t.Fatalf("%s: id argument %T, want int64", name, v)
		}
		return n
	}
	inRange := func(v any) {
		if n := id(v); n < 1 || n > int64(m.TableSize) {
			t.Fatalf("%s: id %d outside [1, %d]", name, n, m.TableSize)
		}
	}
	tableOf := map[Kind]int{}
	for i, s := range stmts {
		if s.kind != Begin && s.kind != Commit && (s.table < 1 || s.table > m.Tables) {
			t.Fatalf("%s: table %d outside [1, %d]", name, s.table, m.Tables)
		}
		switch s.kind {
		case PointSelect, IndexUpdate, Delete:
			inRange(s.args[0])
		case SimpleRange, SumRange, OrderRange, DistinctRange:
			inRange(s.args[0])
			if id(s.args[1]) != id(s.args[0])+int64(m.RangeSize)-1 {
				t.Fatalf("%s: range %v, want [id, id+%d-1]", name, s.args, m.RangeSize)
			}
		case NonIndexUpdate:
			if !cRe.MatchString(s.args[0].(string)) || len(s.args[0].(string)) != 119 {
				t.Fatalf("%s: c = %q", name, s.args[0])
			}
			inRange(s.args[1])
		case Insert:
			prev := stmts[i-1]
			if prev.kind != Delete || id(prev.args[0]) != id(s.args[0]) || prev.table != s.table {
				t.Fatalf("%s: insert %v does not follow the delete of the same id in the same table (%v)", name, s.args, prev)
			}
			inRange(s.args[1])
			if !cRe.MatchString(s.args[2].(string)) || !padRe.MatchString(s.args[3].(string)) {
				t.Fatalf("%s: c/pad = %q %q", name, s.args[2], s.args[3])
			}
		case InsertText:
			if id(s.args[0]) != 0 {
				t.Fatalf("insert id %v, want 0 (AUTO_INCREMENT)", s.args[0])
			}
			inRange(s.args[1])
			q := fmt.Sprintf(s.kind.SQL(s.table), s.args...)
			if !regexp.MustCompile(`^INSERT INTO sbtest\d+ \(id, k, c, pad\) VALUES \(0, \d+, '[-0-9]{119}', '[-0-9]{59}'\)$`).MatchString(q) {
				t.Fatalf("insert text %q", q)
			}
		}
		// Point selects of one event share a table, as execute_point_selects picks it once.
		if s.kind == PointSelect {
			if t0, ok := tableOf[PointSelect]; ok && t0 != s.table {
				t.Fatalf("%s: point selects on tables %d and %d in one event", name, t0, s.table)
			}
			tableOf[PointSelect] = s.table
		}
	}
}

func TestStatementMixOptions(t *testing.T) {
	rw, _ := Lookup("read_write")
	m := DefaultMix()
	m.PointSelects, m.SimpleRanges, m.DeleteInserts, m.SkipTrx, m.RangeSelects = 3, 2, 2, true, true
	var x recorder
	if err := rw.Event(context.Background(), &m, NewRand(DefaultDist(), 2), &x); err != nil {
		t.Fatal(err)
	}
	want := seq(repeat(PointSelect, 3), one(SimpleRange, SimpleRange, SumRange, OrderRange, DistinctRange),
		one(IndexUpdate, NonIndexUpdate, Delete, Insert, Delete, Insert))
	if fmt.Sprint(x.kinds()) != fmt.Sprint(want) {
		t.Errorf("read_write with options = %v, want %v", x.kinds(), want)
	}
	m.RangeSelects = false
	x = recorder{}
	ro, _ := Lookup("read_only")
	if err := ro.Event(context.Background(), &m, NewRand(DefaultDist(), 3), &x); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(x.kinds()) != fmt.Sprint(repeat(PointSelect, 3)) {
		t.Errorf("read_only without ranges or trx = %v", x.kinds())
	}
	if ks := ro.Kinds(m); len(ks) != 1 {
		t.Errorf("read_only without ranges prepares %v", ks)
	}
}

// TestStatementText pins the SQL to oltp_common.lua's stmt_defs.
func TestStatementText(t *testing.T) {
	want := map[Kind]string{
		PointSelect:    "SELECT c FROM sbtest3 WHERE id=?",
		SimpleRange:    "SELECT c FROM sbtest3 WHERE id BETWEEN ? AND ?",
		SumRange:       "SELECT SUM(k) FROM sbtest3 WHERE id BETWEEN ? AND ?",
		OrderRange:     "SELECT c FROM sbtest3 WHERE id BETWEEN ? AND ? ORDER BY c",
		DistinctRange:  "SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN ? AND ? ORDER BY c",
		IndexUpdate:    "UPDATE sbtest3 SET k=k+1 WHERE id=?",
		NonIndexUpdate: "UPDATE sbtest3 SET c=? WHERE id=?",
		Delete:         "DELETE FROM sbtest3 WHERE id=?",
		Insert:         "INSERT INTO sbtest3 (id, k, c, pad) VALUES (?, ?, ?, ?)",
		Begin:          "BEGIN",
		Commit:         "COMMIT",
	}
	for k, sql := range want {
		if got := k.SQL(3); got != sql {
			t.Errorf("%v: %q, want %q", k, got, sql)
		}
	}
	classes := map[Kind]Class{PointSelect: Read, DistinctRange: Read, IndexUpdate: Write, Insert: Write, InsertText: Write, Delete: Write, Begin: Other, Commit: Other}
	for k, c := range classes {
		if k.Class() != c {
			t.Errorf("%v class %v, want %v", k, k.Class(), c)
		}
	}
	if !strings.Contains(CreateTableSQL(2), "c CHAR(120) DEFAULT '' NOT NULL") || !strings.HasPrefix(CreateTableSQL(2), "CREATE TABLE sbtest2(") {
		t.Errorf("create table: %s", CreateTableSQL(2))
	}
}

func TestDistributions(t *testing.T) {
	const n = 200000
	const a, b = 1, 10000
	draw := func(typ string) []uint32 {
		d := DefaultDist()
		d.Type = typ
		r := NewRand(d, 42)
		out := make([]uint32, n)
		for i := range out {
			v := r.Default(a, b)
			if v < a || v > b {
				t.Fatalf("%s drew %d outside [%d, %d]", typ, v, a, b)
			}
			out[i] = v
		}
		return out
	}
	mean := func(vs []uint32) float64 {
		s := 0.0
		for _, v := range vs {
			s += float64(v)
		}
		return s / float64(len(vs))
	}
	frac := func(vs []uint32, lo, hi uint32) float64 {
		c := 0
		for _, v := range vs {
			if v >= lo && v <= hi {
				c++
			}
		}
		return float64(c) / float64(len(vs))
	}
	u := draw("uniform")
	if m := mean(u); math.Abs(m-5000.5) > 50 {
		t.Errorf("uniform mean %v, want about 5000", m)
	}
	if f := frac(u, 1, 1000); math.Abs(f-0.1) > 0.01 {
		t.Errorf("uniform puts %v in the first tenth", f)
	}
	if f := frac(u, b, b); f == 0 {
		t.Error("uniform never draws the upper bound")
	}
	// special: 75% of draws in the middle 1% of the range (4950..5050),
	// the rest gaussian; sysbench's defaults.
	s := draw("special")
	if f := frac(s, 4950, 5051); f < 0.74 || f > 0.80 {
		t.Errorf("special puts %v in the middle 1%%, want about 0.75+", f)
	}
	g := draw("gaussian")
	if m := mean(g); math.Abs(m-5000) > 50 {
		t.Errorf("gaussian mean %v", m)
	}
	if f := frac(g, 1, 2500); f > 0.02 {
		t.Errorf("gaussian (12 iterations) puts %v in the first quarter", f)
	}
	p := draw("pareto")
	if f := frac(p, 1, 2000); f < 0.75 {
		t.Errorf("pareto h=0.2 puts only %v in the first fifth, want about 0.8", f)
	}
	if err := (Dist{Type: "zipf", SpecIter: 12, SpecRes: 75, ParetoH: 0.2}).Validate(); err == nil {
		t.Error("unknown distribution accepted")
	}
}

func TestRandString(t *testing.T) {
	r := NewRand(DefaultDist(), 7)
	c := r.String(cTemplate)
	if len(c) != 119 || !cRe.MatchString(c) {
		t.Errorf("c = %q", c)
	}
	if got := r.String("ab@#"); !regexp.MustCompile(`^ab[a-z][0-9]$`).MatchString(got) {
		t.Errorf("template ab@# gave %q", got)
	}
	if len(padTemplate) != 59 {
		t.Errorf("pad template has %d chars, want 59", len(padTemplate))
	}
}

func TestClassifyErr(t *testing.T) {
	ig := DefaultIgnore()
	cases := []struct {
		err  error
		want errClass
	}{
		{&mysql.MySQLError{Number: 1213}, errIgnored},
		{&mysql.MySQLError{Number: 1205}, errIgnored},
		{&mysql.MySQLError{Number: 1062}, errFatal},
		{&mysql.MySQLError{Number: 1146}, errFatal},
		{&stmtError{kind: PointSelect, table: 1, err: mysql.ErrInvalidConn}, errLost},
		{fmt.Errorf("x: %w", io.ErrUnexpectedEOF), errLost},
		{errors.New("something else"), errFatal},
	}
	for _, c := range cases {
		if got := classifyErr(c.err, ig); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if classifyErr(&mysql.MySQLError{Number: 1062}, IgnoreSet{All: true}) != errIgnored {
		t.Error("--ignore-errors all does not ignore 1062")
	}
}
