package sqlgen

import (
	"reflect"
	"testing"

	"github.com/sluice-db/sluice"
)

// One test per DML builder, over three table shapes:
//
//	composite: PRIMARY KEY (k1 VARCHAR, k2 INT), v TEXT NULL, f DOUBLE NULL, g generated
//	single:    PRIMARY KEY (k VARCHAR), n INT NULL
//	keyless:   a INT NULL, b VARCHAR NULL, c FLOAT, g generated
//
// The target name carries a backquote, a dot and non-ASCII letters.

var target = sluice.TableRef{Schema: "s.x", Name: "t`ü"}

const tq = "`s.x`.`t``ü`"

func compositeSpec() *TableSpec {
	return NewTableSpec(&sluice.Table{Columns: []sluice.Column{
		{Name: "k1", DataType: "varchar"}, {Name: "k2", DataType: "int"},
		{Name: "v", DataType: "text", Nullable: true}, {Name: "f", DataType: "double", Nullable: true},
		{Name: "g", DataType: "int", Generated: true, Nullable: true},
	}, PK: []int{0, 1}}, target)
}

func singleSpec() *TableSpec {
	return NewTableSpec(&sluice.Table{Columns: []sluice.Column{
		{Name: "k", DataType: "VARCHAR"}, {Name: "n", DataType: "int", Nullable: true},
	}, PK: []int{0}}, target)
}

func keylessSpec() *TableSpec {
	return NewTableSpec(&sluice.Table{Columns: []sluice.Column{
		{Name: "a", DataType: "int", Nullable: true}, {Name: "b", DataType: "varchar", Nullable: true},
		{Name: "c", DataType: "float"}, {Name: "g", DataType: "int", Generated: true},
	}}, target)
}

func TestNewTableSpec(t *testing.T) {
	cases := []struct {
		name    string
		spec    *TableSpec
		cols    []string
		write   []int
		key     []int
		keyless bool
		gen     bool
	}{
		{"composite", compositeSpec(), []string{"`k1`", "`k2`", "`v`", "`f`", "`g`"}, []int{0, 1, 2, 3}, []int{0, 1}, false, true},
		{"single", singleSpec(), []string{"`k`", "`n`"}, []int{0, 1}, []int{0}, false, false},
		// Keyless: every column but the generated one identifies a row.
		{"keyless", keylessSpec(), []string{"`a`", "`b`", "`c`", "`g`"}, []int{0, 1, 2}, []int{0, 1, 2}, true, true},
	}
	for _, c := range cases {
		s := c.spec
		if s.Name != tq || !reflect.DeepEqual(s.Cols, c.cols) || !reflect.DeepEqual(s.Write, c.write) ||
			!reflect.DeepEqual(s.Key, c.key) || s.Keyless != c.keyless || s.HasGenerated() != c.gen {
			t.Errorf("%s: name %s cols %q write %v key %v keyless %v generated %v", c.name, s.Name, s.Cols, s.Write, s.Key, s.Keyless, s.HasGenerated())
		}
	}
	// The spec keeps its own key: changing the table's afterwards does not reach it.
	tb := &sluice.Table{Columns: []sluice.Column{{Name: "id", DataType: "int"}}, PK: []int{0}}
	s := NewTableSpec(tb, target)
	tb.PK[0] = 9
	if s.Key[0] != 0 {
		t.Errorf("spec shares the table's PK slice: %v", s.Key)
	}
}

func TestAppendInsert(t *testing.T) {
	cases := []struct {
		name string
		spec *TableSpec
		rows [][]any
		want string
	}{
		// Generated columns are never written.
		{"composite", compositeSpec(), [][]any{{"a'b", int64(7), nil, 1.5, int64(99)}},
			"INSERT INTO " + tq + " (`k1`,`k2`,`v`,`f`) VALUES ('a\\'b',7,NULL,1.5)"},
		{"rows", compositeSpec(), [][]any{{"a", int64(1), "x", nil, nil}, {"b", int64(2), []byte{0}, -2.5, nil}},
			"INSERT INTO " + tq + " (`k1`,`k2`,`v`,`f`) VALUES ('a',1,'x',NULL),('b',2,_binary'\\0',-2.5)"},
		{"keyless", keylessSpec(), [][]any{{nil, nil, float32(0.5), int64(1)}},
			"INSERT INTO " + tq + " (`a`,`b`,`c`) VALUES (NULL,NULL,0.5)"},
	}
	for _, c := range cases {
		if got := string(c.spec.AppendInsert(nil, c.rows...)); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
		// The head and row forms build the same statement.
		b := c.spec.AppendInsertHead(nil)
		for i, r := range c.rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.spec.AppendInsertRow(b, r)
		}
		if string(b) != c.want {
			t.Errorf("%s: head and rows give %s", c.name, b)
		}
	}
}

func TestAppendUpdate(t *testing.T) {
	k := "`k1`='a\\'b' AND CAST(`k1` AS BINARY)<=>_binary'a\\'b' AND `k2`=7"
	before := []any{"a'b", int64(7), "x", 1.5, int64(1)}
	cases := []struct {
		name          string
		spec          *TableSpec
		before, after []any
		want          string
		changed       bool
	}{
		{"one column", compositeSpec(), before, []any{"a'b", int64(7), "y", 1.5, int64(2)},
			"UPDATE " + tq + " SET `v`='y' WHERE " + k, true},
		{"to NULL", compositeSpec(), before, []any{"a'b", int64(7), nil, nil, nil},
			"UPDATE " + tq + " SET `v`=NULL,`f`=NULL WHERE " + k, true},
		// The row is found by its old key.
		{"key changes", compositeSpec(), before, []any{"A'b", int64(8), "x", 1.5, int64(1)},
			"UPDATE " + tq + " SET `k1`='A\\'b',`k2`=8 WHERE " + k, true},
		// A change a collation ignores is still a change.
		{"trailing space", compositeSpec(), before, []any{"a'b", int64(7), "x ", 1.5, int64(1)},
			"UPDATE " + tq + " SET `v`='x ' WHERE " + k, true},
		// Only the generated column changed: nothing to write.
		{"generated only", compositeSpec(), before, []any{"a'b", int64(7), "x", 1.5, int64(5)}, "", false},
		{"same row", compositeSpec(), before, before, "", false},
		// Keyless: found by every column with NULL-safe, exact comparisons, one row.
		{"keyless", keylessSpec(), []any{nil, "a", float32(0.1), int64(0)}, []any{int64(1), "a", float32(0.1), int64(0)},
			"UPDATE " + tq + " SET `a`=1 WHERE `a`<=>NULL AND CAST(`b` AS BINARY)<=>_binary'a' AND `c`<=>1.0000000149011612e-01 LIMIT 1", true},
		{"keyless NULLs", keylessSpec(), []any{nil, nil, nil, nil}, []any{nil, "b", nil, nil},
			"UPDATE " + tq + " SET `b`='b' WHERE `a`<=>NULL AND `b`<=>NULL AND `c`<=>NULL LIMIT 1", true},
	}
	for _, c := range cases {
		got, ok := c.spec.AppendUpdate([]byte("-- "), c.before, c.after)
		want := "-- " + c.want
		if string(got) != want || ok != c.changed {
			t.Errorf("%s:\ngot  %s %v\nwant %s %v", c.name, got, ok, want, c.changed)
		}
	}
}

func TestAppendDelete(t *testing.T) {
	cases := []struct {
		name string
		spec *TableSpec
		row  []any
		want string
	}{
		// Text keys also compare their bytes: the collation's equality may
		// be looser than the unique index (difftest seed 1102).
		{"composite", compositeSpec(), []any{"a'b", int64(7), nil, nil, nil},
			"DELETE FROM " + tq + " WHERE `k1`='a\\'b' AND CAST(`k1` AS BINARY)<=>_binary'a\\'b' AND `k2`=7"},
		{"bytes key", compositeSpec(), []any{[]byte("ß"), int64(-1), nil, nil, nil},
			"DELETE FROM " + tq + " WHERE `k1`=_binary'ß' AND CAST(`k1` AS BINARY)<=>_binary'ß' AND `k2`=-1"},
		// A key column is NOT NULL, so it compares with =: a NULL there
		// matches no row, and the applier's row count stops the task.
		{"NULL in key", compositeSpec(), []any{"a", nil, nil, nil, nil},
			"DELETE FROM " + tq + " WHERE `k1`='a' AND CAST(`k1` AS BINARY)<=>_binary'a' AND `k2`=NULL"},
		{"single", singleSpec(), []any{"k", nil},
			"DELETE FROM " + tq + " WHERE `k`='k' AND CAST(`k` AS BINARY)<=>_binary'k'"},
		{"keyless NULLs", keylessSpec(), []any{nil, nil, nil, int64(3)},
			"DELETE FROM " + tq + " WHERE `a`<=>NULL AND `b`<=>NULL AND `c`<=>NULL LIMIT 1"},
		{"keyless values", keylessSpec(), []any{int64(-4), "A ", float32(1.5), nil},
			"DELETE FROM " + tq + " WHERE `a`<=>-4 AND CAST(`b` AS BINARY)<=>_binary'A ' AND `c`<=>1.5e+00 LIMIT 1"},
	}
	for _, c := range cases {
		if got := string(c.spec.AppendDelete(nil, c.row)); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestAppendDeleteIn(t *testing.T) {
	intKey := NewTableSpec(&sluice.Table{Columns: []sluice.Column{{Name: "id", DataType: "bigint"}, {Name: "v", DataType: "int", Nullable: true}}, PK: []int{0}}, target)
	cases := []struct {
		name string
		spec *TableSpec
		rows [][]any
		want string
	}{
		{"int", intKey, [][]any{{int64(1), nil}, {int64(-2), int64(5)}},
			"DELETE FROM " + tq + " WHERE `id` IN (1,-2)"},
		{"one", intKey, [][]any{{uint64(18446744073709551615), nil}},
			"DELETE FROM " + tq + " WHERE `id` IN (18446744073709551615)"},
		{"text", singleSpec(), [][]any{{"ss", nil}, {"ß", nil}},
			"DELETE FROM " + tq + " WHERE `k` IN ('ss','ß') AND CAST(`k` AS BINARY) IN (_binary'ss',_binary'ß')"},
		{"bytes", singleSpec(), [][]any{{[]byte("a'"), nil}},
			"DELETE FROM " + tq + " WHERE `k` IN (_binary'a\\'') AND CAST(`k` AS BINARY) IN (_binary'a\\'')"},
	}
	for _, c := range cases {
		if got := string(c.spec.AppendDeleteIn(nil, c.rows...)); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestAppendRowExists(t *testing.T) {
	cases := []struct {
		name string
		spec *TableSpec
		row  []any
		want string
	}{
		// Keyed: by key first, then every column, generated ones included.
		{"composite", compositeSpec(), []any{"a", int64(7), nil, 1.5, int64(99)},
			"EXISTS(SELECT 1 FROM " + tq + " WHERE `k1`='a' AND `k2`=7 AND CAST(`k1` AS BINARY)<=>_binary'a' AND `k2`<=>7 AND `v`<=>NULL AND `f`<=>1.5e+00 AND `g`<=>99)"},
		{"composite text", compositeSpec(), []any{"a", int64(7), "é", nil, nil},
			"EXISTS(SELECT 1 FROM " + tq + " WHERE `k1`='a' AND `k2`=7 AND CAST(`k1` AS BINARY)<=>_binary'a' AND `k2`<=>7 AND CAST(`v` AS BINARY)<=>_binary'é' AND `f`<=>NULL AND `g`<=>NULL)"},
		{"keyless", keylessSpec(), []any{nil, "b", float32(2), int64(3)},
			"EXISTS(SELECT 1 FROM " + tq + " WHERE `a`<=>NULL AND CAST(`b` AS BINARY)<=>_binary'b' AND `c`<=>2e+00 AND `g`<=>3)"},
	}
	for _, c := range cases {
		if got := string(c.spec.AppendRowExists(nil, c.row)); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestAppendUpdateJoin(t *testing.T) {
	intKeys := NewTableSpec(&sluice.Table{Columns: []sluice.Column{
		{Name: "a", DataType: "int"}, {Name: "b", DataType: "int"}, {Name: "v", DataType: "varchar", Nullable: true},
		{Name: "g", DataType: "int", Generated: true}, {Name: "w", DataType: "double", Nullable: true},
	}, PK: []int{1, 0}}, target)
	cases := []struct {
		name            string
		spec            *TableSpec
		befores, afters [][]any
		want            string
	}{
		// Key columns in key order (b, a); every writable non-key column is
		// set, generated ones never.
		{"composite", intKeys,
			[][]any{{int64(1), int64(10), "x", nil, nil}, {int64(2), int64(20), nil, nil, 1.5}},
			[][]any{{int64(1), int64(10), nil, nil, 0.5}, {int64(2), int64(20), "y'", nil, 1.5}},
			"UPDATE (SELECT 10 AS `k0`,1 AS `k1`,1 AS `c0`,10 AS `c1`,NULL AS `c2`,0.5 AS `c3` UNION ALL SELECT 20,2,2,20,'y\\'',1.5) AS `v` STRAIGHT_JOIN " + tq +
				" AS `t` ON `t`.`b`=`v`.`k0` AND `t`.`a`=`v`.`k1` SET `t`.`v`=`v`.`c2`,`t`.`w`=`v`.`c3`"},
		{"one row", intKeys,
			[][]any{{int64(1), int64(10), "x", nil, nil}}, [][]any{{int64(1), int64(10), "z", nil, nil}},
			"UPDATE (SELECT 10 AS `k0`,1 AS `k1`,1 AS `c0`,10 AS `c1`,'z' AS `c2`,NULL AS `c3`) AS `v` STRAIGHT_JOIN " + tq +
				" AS `t` ON `t`.`b`=`v`.`k0` AND `t`.`a`=`v`.`k1` SET `t`.`v`=`v`.`c2`,`t`.`w`=`v`.`c3`"},
	}
	for _, c := range cases {
		if got := string(c.spec.AppendUpdateJoin(nil, c.befores, c.afters)); got != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
		}
	}
	// The table value constructor form: the first row names the columns,
	// the others follow as one VALUES list.
	three := [][]any{{int64(1), int64(10), "x", nil, nil}, {int64(2), int64(20), nil, nil, 1.5}, {int64(3), int64(30), nil, nil, nil}}
	got := string(intKeys.AppendUpdateJoinValues(nil, three, three))
	want := "UPDATE (SELECT 10 AS `k0`,1 AS `k1`,1 AS `c0`,10 AS `c1`,'x' AS `c2`,NULL AS `c3` UNION ALL VALUES (20,2,2,20,NULL,1.5),(30,3,3,30,NULL,NULL)) AS `v` STRAIGHT_JOIN " + tq +
		" AS `t` ON `t`.`b`=`v`.`k0` AND `t`.`a`=`v`.`k1` SET `t`.`v`=`v`.`c2`,`t`.`w`=`v`.`c3`"
	if got != want {
		t.Errorf("values:\ngot  %s\nwant %s", got, want)
	}
	if got, want := string(intKeys.AppendUpdateJoinValues(nil, three[:1], three[:1])), string(intKeys.AppendUpdateJoin(nil, three[:1], three[:1])); got != want {
		t.Errorf("values, one row:\ngot  %s\nwant %s", got, want)
	}
}

func TestInsertPlaceholders(t *testing.T) {
	cases := []struct {
		name string
		spec *TableSpec
		rows [][]any
		sql  string
		args []any
	}{
		{"composite", compositeSpec(), [][]any{{"a", int64(1), nil, 1.5, int64(9)}, {"b", int64(2), "x", nil, nil}},
			"INSERT INTO " + tq + " (`k1`,`k2`,`v`,`f`) VALUES (?,?,?,?),(?,?,?,?)",
			[]any{"a", int64(1), nil, 1.5, "b", int64(2), "x", nil}},
		{"keyless", keylessSpec(), [][]any{{nil, "b", float32(1), int64(0)}},
			"INSERT INTO " + tq + " (`a`,`b`,`c`) VALUES (?,?,?)", []any{nil, "b", float32(1)}},
	}
	for _, c := range cases {
		sql, args := c.spec.Insert(c.rows...)
		if sql != c.sql || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s:\ngot  %s %#v\nwant %s %#v", c.name, sql, args, c.sql, c.args)
		}
	}
}

func TestUpdatePlaceholders(t *testing.T) {
	cases := []struct {
		name          string
		spec          *TableSpec
		before, after []any
		sql           string
		args          []any
	}{
		// Every writable column is set; a text key is also matched by its bytes.
		{"composite", compositeSpec(), []any{"a", int64(1), "x", nil, nil}, []any{"a", int64(1), "y", 2.5, nil},
			"UPDATE " + tq + " SET `k1`=?,`k2`=?,`v`=?,`f`=? WHERE `k1`=? AND CAST(`k1` AS BINARY)=? AND `k2`=?",
			[]any{"a", int64(1), "y", 2.5, "a", []byte("a"), int64(1)}},
		// Keyless: text by its bytes, a FLOAT as its exact double, NULL-safe.
		{"keyless", keylessSpec(), []any{nil, "b", float32(0.1), int64(0)}, []any{int64(1), nil, float32(0.1), int64(0)},
			"UPDATE " + tq + " SET `a`=?,`b`=?,`c`=? WHERE `a`<=>? AND CAST(`b` AS BINARY)<=>? AND `c`<=>? LIMIT 1",
			[]any{int64(1), nil, float32(0.1), nil, []byte("b"), float64(float32(0.1))}},
		{"keyless NULLs", keylessSpec(), []any{nil, nil, nil, nil}, []any{nil, nil, nil, nil},
			"UPDATE " + tq + " SET `a`=?,`b`=?,`c`=? WHERE `a`<=>? AND `b`<=>? AND `c`<=>? LIMIT 1",
			[]any{nil, nil, nil, nil, nil, nil}},
	}
	for _, c := range cases {
		sql, args := c.spec.Update(c.before, c.after)
		if sql != c.sql || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s:\ngot  %s %#v\nwant %s %#v", c.name, sql, args, c.sql, c.args)
		}
	}
}

func TestDeletePlaceholders(t *testing.T) {
	cases := []struct {
		name string
		spec *TableSpec
		row  []any
		sql  string
		args []any
	}{
		{"composite", compositeSpec(), []any{"k", int64(3), nil, nil, nil},
			"DELETE FROM " + tq + " WHERE `k1`=? AND CAST(`k1` AS BINARY)=? AND `k2`=?", []any{"k", []byte("k"), int64(3)}},
		{"bytes key", singleSpec(), []any{[]byte{0xff}, nil},
			"DELETE FROM " + tq + " WHERE `k`=? AND CAST(`k` AS BINARY)=?", []any{[]byte{0xff}, []byte{0xff}}},
		{"keyless", keylessSpec(), []any{int64(1), []byte("z"), 0.25, nil},
			"DELETE FROM " + tq + " WHERE `a`<=>? AND CAST(`b` AS BINARY)<=>? AND `c`<=>? LIMIT 1", []any{int64(1), []byte("z"), 0.25}},
	}
	for _, c := range cases {
		sql, args := c.spec.Delete(c.row)
		if sql != c.sql || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s:\ngot  %s %#v\nwant %s %#v", c.name, sql, args, c.sql, c.args)
		}
	}
}
