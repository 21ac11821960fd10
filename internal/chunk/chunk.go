// Package chunk splits a table into primary-key ranges of about N rows, so
// one big table can be dumped (or verified) on many connections at once.
// Dump and verify share it so that their chunks line up.
package chunk

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// Range is one chunk: rows whose key lies in (Lo, Hi]. A nil bound is open,
// so the first chunk has Lo == nil and the last Hi == nil; together the
// ranges of a plan cover every possible key exactly once.
type Range struct {
	Index int   `json:"index"`
	Lo    []any `json:"lo,omitempty"`
	Hi    []any `json:"hi,omitempty"`
}

// Where returns the range's condition and arguments for table t's key.
func (r Range) Where(t *sluice.Table) (string, []any) {
	return sqlgen.KeyRange(KeyColumns(t), r.Lo, r.Hi)
}

// Querier is satisfied by *sql.DB, *sql.Conn and *sql.Tx, so a plan can be
// made inside a snapshot transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// KeyColumns names t's key columns in key order.
func KeyColumns(t *sluice.Table) []string {
	out := make([]string, len(t.PK))
	for i, ci := range t.PK {
		out[i] = t.Columns[ci].Name
	}
	return out
}

// Plan splits t into ranges of about rowsPerChunk rows by walking its key
// index: each step asks for the key rowsPerChunk rows past the previous
// boundary, so chunks are even whatever the key's distribution or type, and
// the whole walk reads the index once. A table without a usable key is one
// range covering everything.
func Plan(ctx context.Context, q Querier, t *sluice.Table, rowsPerChunk int) ([]Range, error) {
	if !t.HasKey() || rowsPerChunk <= 0 {
		return []Range{{Index: 0}}, nil
	}
	if col, err := noPadChar(ctx, q, t); err != nil {
		return nil, fmt.Errorf("plan chunks of %s: %w", t.Ref, err)
	} else if col != "" {
		return []Range{{Index: 0}}, nil
	}
	cols := KeyColumns(t)
	list := sqlgen.ColumnList(cols)
	var out []Range
	var lo []any
	for {
		where, args := sqlgen.KeyRange(cols, lo, nil)
		query := fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT 1 OFFSET %d",
			list, t.Ref.Quoted(), where, list, rowsPerChunk-1)
		hi, err := queryKey(ctx, q, t, query, args)
		if err != nil {
			return nil, fmt.Errorf("plan chunks of %s: %w", t.Ref, err)
		}
		if hi == nil {
			out = append(out, Range{Index: len(out), Lo: lo})
			return out, nil
		}
		out = append(out, Range{Index: len(out), Lo: lo, Hi: hi})
		lo = hi
	}
}

// noPadChar names t's first key column that is CHAR with a NO PAD
// collation, or "". MariaDB orders such a column two ways: its index pads
// stored values with spaces to the column's length before comparing, while
// a comparison in an expression does not pad. So the index walk that finds
// the bounds and the range conditions that read a chunk disagree ('ß' and
// 'ss' are equal in utf8mb4_unicode_nopad_ci, but 'ß'+7 spaces sorts after
// 'ss'+6 spaces; 'a' sorts after 'a\t' in the index and before it in an
// expression), and a row falls in no chunk or in two: difftest seed 2812
// lost a row this way. Such a table is read as one range. MySQL's NO PAD
// collations are the UCA 9.0.0 ones (_0900_); MariaDB's say nopad.
func noPadChar(ctx context.Context, q Querier, t *sluice.Table) (string, error) {
	cols := KeyColumns(t)
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	args := []any{t.Ref.Schema, t.Ref.Name}
	for _, c := range cols {
		args = append(args, c)
	}
	rows, err := q.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME IN (`+marks+`)
		AND DATA_TYPE = 'char' AND (COLLATION_NAME LIKE '%nopad%' OR COLLATION_NAME LIKE '%\_0900\_%')
		ORDER BY ORDINAL_POSITION LIMIT 1`, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var name string
	if rows.Next() {
		if err := rows.Scan(&name); err != nil {
			return "", err
		}
	}
	return name, rows.Err()
}

// queryKey returns the key of the single row query selects, or nil.
func queryKey(ctx context.Context, q Querier, t *sluice.Table, query string, args []any) ([]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	raw := make([]sql.RawBytes, len(t.PK))
	dest := make([]any, len(raw))
	for i := range raw {
		dest[i] = &raw[i]
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	key := make([]any, len(raw))
	for i, ci := range t.PK {
		key[i] = KeyValue(t.Columns[ci], raw[i])
	}
	return key, rows.Err()
}

// KeyValue turns a key column's text-protocol bytes into a query argument.
// Binary columns stay []byte (sent as _binary literals); everything else is
// sent as a string, so comparisons use the column's own collation and agree
// with the index order that the plan walked.
func KeyValue(c sluice.Column, b []byte) any {
	if b == nil {
		return nil
	}
	switch strings.ToLower(c.DataType) {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit":
		// Never nil: an empty value is a key like any other, and a nil
		// []byte is sent as NULL, which no row's key compares equal to
		// (every row of a chunk bounded by '' was silently left out).
		return append(make([]byte, 0, len(b)), b...)
	}
	return string(b)
}
