package sqlgen

import (
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
)

// KeyRange builds the WHERE condition selecting rows whose key (cols, in key
// order) lies in (lo, hi]: lo is exclusive, hi inclusive, and a nil bound is
// open. It returns "1=1" when both bounds are nil. The nested OR form is what
// the range optimizer turns into a single index range on every MySQL-family
// server, unlike row constructors, which MariaDB does not optimize.
//
// A non-nil bound must hold one value per column: it panics otherwise, as
// a bound cut on another key would select other rows (callers check a
// stored plan against the key first).
func KeyRange(cols []string, lo, hi []any) (string, []any) {
	for _, b := range [][]any{lo, hi} {
		if b != nil && (len(b) != len(cols) || len(cols) == 0) {
			panic(fmt.Sprintf("sqlgen.KeyRange: a bound of %d values for a key of %d columns", len(b), len(cols)))
		}
	}
	var parts []string
	var args []any
	if lo != nil {
		s, a := bound(cols, lo, ">", ">")
		parts, args = append(parts, s), append(args, a...)
	}
	if hi != nil {
		s, a := bound(cols, hi, "<", "<=")
		parts, args = append(parts, s), append(args, a...)
	}
	if len(parts) == 0 {
		return "1=1", nil
	}
	return strings.Join(parts, " AND "), args
}

// bound builds c1 op' v1 AND (c1 op v1 OR (c1 = v1 AND (c2 op v2 OR ... cn last vn))).
// The leading inclusive conjunct on the first column lets the optimizer pick
// an index range even when it cannot see through the OR tree.
func bound(cols []string, vals []any, op, last string) (string, []any) {
	var b strings.Builder
	var args []any
	first := op + "="
	b.WriteString(sluice.QuoteIdent(cols[0]) + " " + first + " ?")
	args = append(args, vals[0])
	if len(cols) == 1 {
		return sluice.QuoteIdent(cols[0]) + " " + last + " ?", []any{vals[0]}
	}
	b.WriteString(" AND ")
	var rec func(i int) string
	rec = func(i int) string {
		c := sluice.QuoteIdent(cols[i])
		if i == len(cols)-1 {
			args = append(args, vals[i])
			return c + " " + last + " ?"
		}
		args = append(args, vals[i], vals[i])
		return "(" + c + " " + op + " ? OR (" + c + " = ? AND " + rec(i+1) + "))"
	}
	b.WriteString(rec(0))
	return b.String(), args
}

// ColumnList quotes and joins column names: `a`, `b`.
func ColumnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sluice.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}
