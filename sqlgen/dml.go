package sqlgen

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// TableSpec is what the DML builders need to know about one target table.
// Build it once per table version and reuse it for every row.
type TableSpec struct {
	// Name is the quoted target `schema`.`table`.
	Name string
	// Cols are the quoted column names, by source column index.
	Cols []string
	// Write are the column indexes that take values (generated columns are
	// computed by the target and never written).
	Write []int
	// Key are the column indexes that identify a row in WHERE clauses. For a
	// table without a key these are all comparable columns and Keyless is set.
	Key     []int
	Keyless bool
	// nullable[i] says column i may hold NULL, so WHERE uses <=>.
	nullable []bool
	// exactType[i] says column i's values are compared by their exact value
	// (text and bytes, floats) in a full-row match; other types compare
	// exactly with <=>.
	exactType []bool
	// exact[i] says a keyless WHERE compares column i by its exact value:
	// strings and bytes by their bytes (CAST(col AS BINARY)), not by the
	// column's collation, which finds 'A' for 'a' in a _ci column and 'a '
	// for 'a' in any PAD SPACE one; floats by a DOUBLE literal that is the
	// stored value exactly.
	exact []bool
	// keyExact[i] says key column i is text in a collation, and a WHERE by
	// key also compares its exact bytes. A collation's equality can be
	// looser than the unique index it backs: in utf8mb4_unicode_nopad_ci a
	// unique CHAR key holds both 'ss' and 'ß' while WHERE k = 'ss' finds
	// both (difftest seed 1102), so a DELETE by key removed two rows.
	keyExact []bool
}

// NewTableSpec builds the spec for writing rows of t into target. Keyless
// tables identify a row by every column but generated ones, each compared
// by its exact value (see TableSpec.exact), and change one row at a time
// (LIMIT 1), so duplicate rows stay duplicates: any row that matches is
// byte for byte the row the source changed.
func NewTableSpec(t *sluice.Table, target sluice.TableRef) *TableSpec {
	s := &TableSpec{Name: target.Quoted(), Cols: make([]string, len(t.Columns)), nullable: make([]bool, len(t.Columns)), exactType: make([]bool, len(t.Columns))}
	for i, c := range t.Columns {
		s.Cols[i] = sluice.QuoteIdent(c.Name)
		s.nullable[i] = c.Nullable
		s.exactType[i] = textual[strings.ToLower(c.DataType)] || c.DataType == "float" || c.DataType == "double"
		if !c.Generated {
			s.Write = append(s.Write, i)
		}
	}
	if t.HasKey() {
		s.Key = append([]int(nil), t.PK...)
		s.keyExact = make([]bool, len(t.Columns))
		for _, k := range s.Key {
			s.nullable[k] = false
			s.keyExact[k] = collatedText[strings.ToLower(t.Columns[k].DataType)]
		}
		return s
	}
	s.Keyless = true
	s.exact = make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		if c.Generated {
			continue // computed from the other columns, which are compared
		}
		s.Key = append(s.Key, i)
		s.nullable[i] = true // NULL-safe comparison costs nothing and is always right
		s.exact[i] = s.exactType[i]
	}
	return s
}

// textual are the data types whose values are strings or bytes compared by
// a collation (or, for JSON and spatial types, stored as bytes).
var textual = map[string]bool{"char": true, "varchar": true, "binary": true, "varbinary": true,
	"tinytext": true, "text": true, "mediumtext": true, "longtext": true,
	"tinyblob": true, "blob": true, "mediumblob": true, "longblob": true, "json": true,
	"geometry": true, "point": true, "linestring": true, "polygon": true, "multipoint": true,
	"multilinestring": true, "multipolygon": true, "geometrycollection": true,
	"uuid": true, "inet4": true, "inet6": true}

// collatedText are the data types compared by a collation of a character
// set (binary strings compare by their bytes already).
var collatedText = map[string]bool{"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true}

// appendKeyExact appends " AND CAST(col AS BINARY)<=>_binary'...'" when key
// column i compares by a collation and v is its text.
func (s *TableSpec) appendKeyExact(b []byte, i int, v any) []byte {
	if s.keyExact == nil || !s.keyExact[i] {
		return b
	}
	switch v.(type) {
	case string, []byte:
		b = append(b, " AND "...)
		return s.appendExactCond(b, i, v)
	}
	return b
}

// appendExactCond appends the keyless match of column i against v.
func (s *TableSpec) appendExactCond(b []byte, i int, v any) []byte {
	switch x := v.(type) {
	case string:
		b = append(b, "CAST("...)
		b = append(b, s.Cols[i]...)
		b = append(b, " AS BINARY)<=>_binary"...)
		return appendQuotedBytes(b, []byte(x))
	case []byte:
		b = append(b, "CAST("...)
		b = append(b, s.Cols[i]...)
		b = append(b, " AS BINARY)<=>_binary"...)
		return appendQuotedBytes(b, x)
	case float32:
		b = append(b, s.Cols[i]...)
		b = append(b, "<=>"...)
		return appendExactDouble(b, float64(x))
	case float64:
		b = append(b, s.Cols[i]...)
		b = append(b, "<=>"...)
		return appendExactDouble(b, x)
	}
	b = append(b, s.Cols[i]...)
	b = append(b, "<=>"...)
	return AppendValue(b, v)
}

// HasGenerated reports whether the table has generated columns, whose
// values the target computes.
func (s *TableSpec) HasGenerated() bool { return len(s.Write) < len(s.Cols) }

// AppendRowExists appends EXISTS(SELECT 1 FROM t WHERE ...), true when the
// target holds a row equal to row in every column, generated ones included:
// text and bytes by their exact bytes, floats by their exact value, other
// types with <=>. A keyed table is looked up by its key first.
func (s *TableSpec) AppendRowExists(b []byte, row []any) []byte {
	b = append(b, "EXISTS(SELECT 1 FROM "...)
	b = append(b, s.Name...)
	b = append(b, " WHERE "...)
	n := 0
	if !s.Keyless {
		for _, k := range s.Key {
			if n > 0 {
				b = append(b, " AND "...)
			}
			b = append(b, s.Cols[k]...)
			b = append(b, '=')
			b = appendKeyValue(b, row[k])
			n++
		}
	}
	for i := range s.Cols {
		if n > 0 {
			b = append(b, " AND "...)
		}
		n++
		if s.exactType[i] {
			b = s.appendExactCond(b, i, row[i])
			continue
		}
		b = append(b, s.Cols[i]...)
		b = append(b, "<=>"...)
		b = AppendValue(b, row[i])
	}
	return append(b, ')')
}

// appendKeyValue writes a key value to compare with: a float as its exact
// double, since the shortest form of a FLOAT (1.0000001) is read as a
// DECIMAL that the stored FLOAT (1.0000001192092896 as a double) does not
// equal, and a WHERE by a FLOAT key found no row (difftest seed 2535).
func appendKeyValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case float32:
		return appendExactDouble(b, float64(x))
	case float64:
		return appendExactDouble(b, x)
	}
	return AppendValue(b, v)
}

// appendExactDouble writes f in exponent form, which MariaDB reads as a
// DOUBLE (a plain 0.1 would be a DECIMAL); every float32 is a double
// exactly, and a FLOAT column compares as its exact double value.
func appendExactDouble(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "NULL"...)
	}
	return strconv.AppendFloat(b, f, 'e', -1, 64)
}

// AppendInsertHead appends "INSERT INTO t (cols) VALUES " to b; append rows
// with AppendInsertRow, separated by commas.
func (s *TableSpec) AppendInsertHead(b []byte) []byte {
	b = append(b, "INSERT INTO "...)
	b = append(b, s.Name...)
	b = append(b, " ("...)
	for n, i := range s.Write {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, s.Cols[i]...)
	}
	return append(b, ") VALUES "...)
}

// AppendInsertRow appends "(v1,v2,...)".
func (s *TableSpec) AppendInsertRow(b []byte, row []any) []byte {
	b = append(b, '(')
	for n, i := range s.Write {
		if n > 0 {
			b = append(b, ',')
		}
		b = AppendValue(b, row[i])
	}
	return append(b, ')')
}

// AppendInsert appends one multi-row INSERT of rows.
func (s *TableSpec) AppendInsert(b []byte, rows ...[]any) []byte {
	b = s.AppendInsertHead(b)
	for n, r := range rows {
		if n > 0 {
			b = append(b, ',')
		}
		b = s.AppendInsertRow(b, r)
	}
	return b
}

// AppendUpdate appends an UPDATE that turns the row before into after. Only
// changed columns are set; it returns b unchanged and false when nothing
// changed.
func (s *TableSpec) AppendUpdate(b []byte, before, after []any) ([]byte, bool) {
	start := len(b)
	b = append(b, "UPDATE "...)
	b = append(b, s.Name...)
	b = append(b, " SET "...)
	n := 0
	for _, i := range s.Write {
		if EqualValue(before[i], after[i]) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, s.Cols[i]...)
		b = append(b, '=')
		b = AppendValue(b, after[i])
	}
	if n == 0 {
		return b[:start], false
	}
	return s.appendWhere(b, before), true
}

// AppendDelete appends a DELETE of the row before.
func (s *TableSpec) AppendDelete(b []byte, before []any) []byte {
	b = append(b, "DELETE FROM "...)
	b = append(b, s.Name...)
	return s.appendWhere(b, before)
}

// AppendDeleteIn appends one DELETE of several rows by a single-column key:
// DELETE FROM t WHERE k IN (...). It needs a one-column key (not Keyless).
func (s *TableSpec) AppendDeleteIn(b []byte, rows ...[]any) []byte {
	k := s.Key[0]
	b = append(b, "DELETE FROM "...)
	b = append(b, s.Name...)
	b = append(b, " WHERE "...)
	b = append(b, s.Cols[k]...)
	b = append(b, " IN ("...)
	for n, r := range rows {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendKeyValue(b, r[k])
	}
	b = append(b, ')')
	if s.keyExact != nil && s.keyExact[k] {
		b = append(b, " AND CAST("...)
		b = append(b, s.Cols[k]...)
		b = append(b, " AS BINARY) IN ("...)
		for n, r := range rows {
			if n > 0 {
				b = append(b, ',')
			}
			switch x := r[k].(type) {
			case string:
				b = append(b, "_binary"...)
				b = appendQuotedBytes(b, []byte(x))
			default:
				b = AppendValue(b, x)
			}
		}
		b = append(b, ')')
	}
	return b
}

func (s *TableSpec) appendWhere(b []byte, row []any) []byte {
	b = append(b, " WHERE "...)
	for n, i := range s.Key {
		if n > 0 {
			b = append(b, " AND "...)
		}
		if s.exact != nil && s.exact[i] {
			b = s.appendExactCond(b, i, row[i])
			continue
		}
		b = append(b, s.Cols[i]...)
		if s.nullable[i] {
			b = append(b, "<=>"...)
		} else {
			b = append(b, '=')
		}
		b = appendKeyValue(b, row[i])
		b = s.appendKeyExact(b, i, row[i])
	}
	if s.Keyless {
		b = append(b, " LIMIT 1"...)
	}
	return b
}

// EqualValue reports whether two row values are exactly the same (bytes for
// strings): any difference, even one a collation ignores, is a change.
func EqualValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case nil:
		return b == nil
	}
	defer func() { _ = recover() }() // incomparable dynamic types count as changed
	return a == b
}

// Insert is the placeholder form of AppendInsert.
func (s *TableSpec) Insert(rows ...[]any) (string, []any) {
	var sb strings.Builder
	args := make([]any, 0, len(rows)*len(s.Write))
	sb.Write(s.AppendInsertHead(nil))
	for n, r := range rows {
		if n > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		for m, i := range s.Write {
			if m > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('?')
			args = append(args, r[i])
		}
		sb.WriteByte(')')
	}
	return sb.String(), args
}

// Update is the placeholder form of AppendUpdate; it sets every writable column.
func (s *TableSpec) Update(before, after []any) (string, []any) {
	var sb strings.Builder
	var args []any
	sb.WriteString("UPDATE " + s.Name + " SET ")
	for n, i := range s.Write {
		if n > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(s.Cols[i] + "=?")
		args = append(args, after[i])
	}
	args = s.where(&sb, before, args)
	return sb.String(), args
}

// Delete is the placeholder form of AppendDelete.
func (s *TableSpec) Delete(before []any) (string, []any) {
	var sb strings.Builder
	sb.WriteString("DELETE FROM " + s.Name)
	args := s.where(&sb, before, nil)
	return sb.String(), args
}

func (s *TableSpec) where(sb *strings.Builder, row []any, args []any) []any {
	sb.WriteString(" WHERE ")
	for n, i := range s.Key {
		if n > 0 {
			sb.WriteString(" AND ")
		}
		v := row[i]
		if s.exact != nil && s.exact[i] {
			switch x := v.(type) {
			case string:
				v = []byte(x)
			case float32:
				v = float64(x) // bound as a DOUBLE: the FLOAT's exact value
			}
			if _, ok := v.([]byte); ok {
				sb.WriteString("CAST(" + s.Cols[i] + " AS BINARY)<=>?")
				args = append(args, v)
				continue
			}
		}
		sb.WriteString(s.Cols[i])
		if s.nullable[i] {
			sb.WriteString("<=>?")
		} else {
			sb.WriteString("=?")
		}
		args = append(args, v)
		if s.keyExact != nil && s.keyExact[i] {
			switch x := v.(type) {
			case string:
				sb.WriteString(" AND CAST(" + s.Cols[i] + " AS BINARY)=?")
				args = append(args, []byte(x))
			case []byte:
				sb.WriteString(" AND CAST(" + s.Cols[i] + " AS BINARY)=?")
				args = append(args, x)
			}
		}
	}
	if s.Keyless {
		sb.WriteString(" LIMIT 1")
	}
	return args
}

// AppendUpdateJoin appends one UPDATE of several rows by key, through a
// derived table of the new values:
//
//	UPDATE t AS `t` JOIN (SELECT k0, c0.. UNION ALL SELECT ...) AS `v`
//	  ON `t`.key = `v`.`k0` SET `t`.col = `v`.`c0`, ...
//
// Every writable non-key column is set from the after image (unchanged
// ones to the same value); befores give the keys that find the rows, and
// the key must not change. Use it only with integer keys: comparing a
// string key with a derived column could mix collations. A table whose only
// writable columns are its key has nothing to update: do not use it then.
func (s *TableSpec) AppendUpdateJoin(b []byte, befores, afters [][]any) []byte {
	return s.appendUpdateJoin(b, befores, afters, false)
}

// AppendUpdateJoinValues is AppendUpdateJoin with the derived table's rows
// after the first as one table value constructor (MariaDB 10.3 and later):
//
//	UPDATE (SELECT k0, c0.. UNION ALL VALUES (..),(..)) AS `v` STRAIGHT_JOIN t ...
//
// The server then runs two SELECTs for the derived table instead of one
// per row: it spent about a third less CPU on a 200-row statement (issue
// 34). The rows' types are aggregated as in a UNION, so the values stored
// are the same.
func (s *TableSpec) AppendUpdateJoinValues(b []byte, befores, afters [][]any) []byte {
	return s.appendUpdateJoin(b, befores, afters, true)
}

func (s *TableSpec) appendUpdateJoin(b []byte, befores, afters [][]any, values bool) []byte {
	// The derived table of keys comes first and STRAIGHT_JOIN keeps it
	// first: each row of t is then found by eq_ref on its key. Left to the
	// optimizer, a table whose statistics lag behind a bulk load was scanned
	// instead, and under REPEATABLE READ that locked every row it passed
	// (50,014 in one demo run), stalling every other worker until the lock
	// wait timeout.
	b = append(b, "UPDATE ("...)
	for n := range befores {
		switch {
		case n == 0:
			b = append(b, "SELECT "...)
		case !values:
			b = append(b, " UNION ALL SELECT "...)
		case n == 1:
			b = append(b, " UNION ALL VALUES ("...)
		default:
			b = append(b, ",("...)
		}
		for j, ki := range s.Key {
			if j > 0 {
				b = append(b, ',')
			}
			b = AppendValue(b, befores[n][ki])
			if n == 0 {
				b = append(b, " AS `k"...)
				b = strconv.AppendInt(b, int64(j), 10)
				b = append(b, '`')
			}
		}
		for m, w := range s.Write {
			b = append(b, ',')
			b = AppendValue(b, afters[n][w])
			if n == 0 {
				b = append(b, " AS `c"...)
				b = strconv.AppendInt(b, int64(m), 10)
				b = append(b, '`')
			}
		}
		if values && n > 0 {
			b = append(b, ')')
		}
	}
	b = append(b, ") AS `v` STRAIGHT_JOIN "...)
	b = append(b, s.Name...)
	b = append(b, " AS `t` ON "...)
	for j, ki := range s.Key {
		if j > 0 {
			b = append(b, " AND "...)
		}
		b = append(b, "`t`."...)
		b = append(b, s.Cols[ki]...)
		b = append(b, "=`v`.`k"...)
		b = strconv.AppendInt(b, int64(j), 10)
		b = append(b, '`')
	}
	b = append(b, " SET "...)
	first := true
	for m, w := range s.Write {
		if s.isKey(w) {
			continue // the rows are found by it; it does not change
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, "`t`."...)
		b = append(b, s.Cols[w]...)
		b = append(b, "=`v`.`c"...)
		b = strconv.AppendInt(b, int64(m), 10)
		b = append(b, '`')
	}
	return b
}

func (s *TableSpec) isKey(col int) bool {
	for _, k := range s.Key {
		if k == col {
			return true
		}
	}
	return false
}
