package sqlgen

import (
	"reflect"
	"strings"
	"testing"
)

func TestKeyRange(t *testing.T) {
	cases := []struct {
		name   string
		cols   []string
		lo, hi []any
		sql    string
		args   []any
	}{
		{"open", []string{"id"}, nil, nil, "1=1", nil},
		{"no key, open", nil, nil, nil, "1=1", nil},
		{"single lo", []string{"id"}, []any{5}, nil, "`id` > ?", []any{5}},
		{"single hi", []string{"id"}, nil, []any{9}, "`id` <= ?", []any{9}},
		{"single both", []string{"id"}, []any{5}, []any{9}, "`id` > ? AND `id` <= ?", []any{5, 9}},
		{"composite lo", []string{"a", "b"}, []any{1, 2}, nil,
			"`a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?))", []any{1, 1, 1, 2}},
		{"composite hi", []string{"a", "b", "c"}, nil, []any{1, 2, 3},
			"`a` <= ? AND (`a` < ? OR (`a` = ? AND (`b` < ? OR (`b` = ? AND `c` <= ?))))", []any{1, 1, 1, 2, 2, 3}},
		{"composite both", []string{"a", "b"}, []any{"x", int64(1)}, []any{"y", int64(2)},
			"`a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?)) AND `a` <= ? AND (`a` < ? OR (`a` = ? AND `b` <= ?))",
			[]any{"x", "x", "x", int64(1), "y", "y", "y", int64(2)}},
		{"quoted names", []string{"we`ird", "a.b", "ключ"}, []any{1, 2, 3}, nil,
			"`we``ird` >= ? AND (`we``ird` > ? OR (`we``ird` = ? AND (`a.b` > ? OR (`a.b` = ? AND `ключ` > ?))))",
			[]any{1, 1, 1, 2, 2, 3}},
		// Values are always placeholders, never text: a bound with quotes
		// or bytes is passed as it is.
		{"bytes bound", []string{"k"}, []any{[]byte("a'\x00")}, nil, "`k` > ?", []any{[]byte("a'\x00")}},
	}
	for _, c := range cases {
		sql, args := KeyRange(c.cols, c.lo, c.hi)
		if sql != c.sql || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s:\n got %s %v\nwant %s %v", c.name, sql, args, c.sql, c.args)
		}
	}
}

// TestKeyRangeRefusesMismatchedBounds: a bound with more or fewer values
// than the key has columns is a caller's mistake (a plan cut on another
// key: dump checks it first, see planFits). KeyRange used to ignore extra
// values, and so selected a range of the first columns only: it panics
// instead of building a condition that selects other rows.
func TestKeyRangeRefusesMismatchedBounds(t *testing.T) {
	cases := []struct {
		name   string
		cols   []string
		lo, hi []any
	}{
		{"lo too long", []string{"a"}, []any{1, 2}, nil},
		{"hi too long", []string{"a"}, nil, []any{1, 2}},
		{"lo too short", []string{"a", "b"}, []any{1}, nil},
		{"hi too short", []string{"a", "b"}, []any{1, 2}, []any{3}},
		{"empty bound", []string{"a"}, []any{}, nil},
		{"no columns", nil, []any{1}, nil},
		{"no columns, empty bound", []string{}, nil, []any{}},
	}
	for _, c := range cases {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("%s: KeyRange(%q, %v, %v) did not panic", c.name, c.cols, c.lo, c.hi)
					return
				}
				if msg, ok := r.(string); !ok || !strings.Contains(msg, "sqlgen.KeyRange") {
					t.Errorf("%s: panic %v, want a sqlgen.KeyRange message", c.name, r)
				}
			}()
			KeyRange(c.cols, c.lo, c.hi)
		}()
	}
}

func TestColumnList(t *testing.T) {
	cases := []struct {
		cols []string
		want string
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{"a"}, "`a`"},
		{[]string{"a", "b", "c"}, "`a`, `b`, `c`"},
		{[]string{"we`ird", "a.b", "ü", ""}, "`we``ird`, `a.b`, `ü`, ``"},
	}
	for _, c := range cases {
		if got := ColumnList(c.cols); got != c.want {
			t.Errorf("ColumnList(%q) = %s, want %s", c.cols, got, c.want)
		}
	}
}
