package sqlgen

import (
	"reflect"
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
		{"single lo", []string{"id"}, []any{5}, nil, "`id` > ?", []any{5}},
		{"single both", []string{"id"}, []any{5}, []any{9}, "`id` > ? AND `id` <= ?", []any{5, 9}},
		{"composite lo", []string{"a", "b"}, []any{1, 2}, nil,
			"`a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?))", []any{1, 1, 1, 2}},
		{"composite hi", []string{"a", "b", "c"}, nil, []any{1, 2, 3},
			"`a` <= ? AND (`a` < ? OR (`a` = ? AND (`b` < ? OR (`b` = ? AND `c` <= ?))))", []any{1, 1, 1, 2, 2, 3}},
	}
	for _, c := range cases {
		sql, args := KeyRange(c.cols, c.lo, c.hi)
		if sql != c.sql || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%s:\n got %s %v\nwant %s %v", c.name, sql, args, c.sql, c.args)
		}
	}
}
