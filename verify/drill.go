package verify

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// srcRow is one source row of a differing chunk.
type srcRow struct {
	vals []string
	hash string
	seen bool
}

// drillKeyed names every key of one chunk that differs. The source side of
// a chunk is bounded by the plan (about RowsPerChunk rows), so it is held
// in memory; the target side, which may hold any number of extra rows, is
// streamed past it. Both come in key order, which orders the report.
// It reports whether any difference was found.
func (r *runner) drillKeyed(ctx context.Context, st *tableState, chunkIdx int, where string, args []any) (bool, error) {
	t := st.t
	nk := len(t.PK)
	var rows []srcRow
	index := map[string]int{}
	err := scanRows(ctx, r.src, rowsQuery(t, st.res.Source, where), args, nk+1, func(v []sql.RawBytes) {
		vals := make([]string, nk)
		for i := range vals {
			vals[i] = string(v[i])
		}
		index[keyString(v[:nk])] = len(rows)
		rows = append(rows, srcRow{vals: vals, hash: string(v[nk])})
	})
	if err != nil {
		return false, &QueryError{Side: Source, Op: "drill down", Err: err}
	}

	// Each pass meets its keys in key order, so the first max of each pass
	// include the first max of the chunk once record merges them.
	var fromTarget, fromSource []chunkDiff
	var missing, extra, different int64
	// An extra row sorts after the last source row matched before it.
	last, sub := -1, 0
	err = scanRows(ctx, r.dst, rowsQuery(t, st.res.Target, where), args, nk+1, func(v []sql.RawBytes) {
		i, ok := index[keyString(v[:nk])]
		if !ok {
			extra++
			sub++
			if len(fromTarget) < st.max {
				vals := make([]string, nk)
				for j := range vals {
					vals[j] = string(v[j])
				}
				fromTarget = append(fromTarget, chunkDiff{pos: last, sub: sub, d: newDiff(t, Extra, vals)})
			}
			return
		}
		rows[i].seen = true
		last, sub = i, 0
		if rows[i].hash != string(v[nk]) {
			different++
			if len(fromTarget) < st.max {
				fromTarget = append(fromTarget, chunkDiff{pos: i, d: newDiff(t, Different, rows[i].vals)})
			}
		}
	})
	if err != nil {
		return false, &QueryError{Side: Target, Op: "drill down " + st.res.Target.String(), Err: err}
	}
	for i := range rows {
		if !rows[i].seen {
			missing++
			if len(fromSource) < st.max {
				fromSource = append(fromSource, chunkDiff{pos: i, d: newDiff(t, Missing, rows[i].vals)})
			}
		}
	}
	st.record(chunkIdx, append(fromTarget, fromSource...), missing, extra, different)
	return missing+extra+different > 0, nil
}

// drillKeyless compares a table without a key as a multiset of row
// hashes. A changed row shows as one missing and one extra row. It
// reports whether the difference is explained (counted, or too big to count).
func (r *runner) drillKeyless(ctx context.Context, st *tableState, srcRows int64) (bool, error) {
	if srcRows > int64(r.cfg.MaxKeylessRows) {
		st.mu.Lock()
		st.res.Detail = fmt.Sprintf("table has no key and %d rows (more than max-keyless-rows %d), so differing rows were not counted", srcRows, r.cfg.MaxKeylessRows)
		st.mu.Unlock()
		return true, nil
	}
	counts := map[string]int{}
	err := scanRows(ctx, r.src, hashesQuery(st.t, st.res.Source), nil, 1, func(v []sql.RawBytes) { counts[string(v[0])]++ })
	if err != nil {
		return false, &QueryError{Side: Source, Op: "drill down", Err: err}
	}
	var missing, extra int64
	err = scanRows(ctx, r.dst, hashesQuery(st.t, st.res.Target), nil, 1, func(v []sql.RawBytes) {
		h := string(v[0])
		if counts[h] > 0 {
			counts[h]--
			return
		}
		extra++
	})
	if err != nil {
		return false, &QueryError{Side: Target, Op: "drill down " + st.res.Target.String(), Err: err}
	}
	for _, n := range counts {
		missing += int64(n)
	}
	st.mu.Lock()
	st.res.Detail = "table has no key: rows were compared by content, so a changed row counts as one missing and one extra"
	st.mu.Unlock()
	st.record(0, nil, missing, extra, 0)
	return missing+extra > 0, nil
}

// scanRows runs query and calls fn with each row's n columns; the bytes
// are only valid during the call.
func scanRows(ctx context.Context, db *sql.DB, query string, args []any, n int, fn func([]sql.RawBytes)) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]sql.RawBytes, n)
	dest := make([]any, n)
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		fn(vals)
	}
	return rows.Err()
}

// keyString is an unambiguous map key for a key's values.
func keyString(vals []sql.RawBytes) string {
	var b strings.Builder
	for _, v := range vals {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.Write(v)
	}
	return b.String()
}

func newDiff(t *sluice.Table, kind Kind, vals []string) Diff {
	return Diff{Kind: kind, Key: formatKey(t, vals), Values: vals}
}

// formatKey prints a key as col=value pairs: numbers bare, binary strings
// as 0x hex, other values quoted with Go escapes so that control
// characters and spaces stay visible.
func formatKey(t *sluice.Table, vals []string) string {
	parts := make([]string, len(t.PK))
	for i, ci := range t.PK {
		c := t.Columns[ci]
		v := vals[i]
		switch strings.ToLower(c.DataType) {
		case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "float", "double", "year":
		case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit":
			v = "0x" + hex.EncodeToString([]byte(v))
		default:
			v = strconv.Quote(v)
		}
		parts[i] = c.Name + "=" + v
	}
	return strings.Join(parts, ",")
}
