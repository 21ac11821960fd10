package verify

import (
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/sqlgen"
)

// The row hash is MD5 over a canonical, unambiguous text form of the row's
// stored (non-generated) columns. Generated columns are left out: their
// values follow from the others, and a target may define them differently.
//
// Each column contributes one piece to a CONCAT:
//   - NULL is "N"; any value starts with its byte length and ':', so NULL,
//     '' and the string "N" all differ, and no value can bleed into the next
//     piece (a '#' or ',' inside a value cannot fake a column boundary);
//   - long text and blob columns contribute MD5(value), a fixed 32 hex
//     digits, so a row's CONCAT stays far below max_allowed_packet (above
//     it, CONCAT returns NULL and the row would silently hash to nothing);
//   - text is converted to utf8mb4 with a binary collation, so a target that
//     stores the same text in another character set still compares equal,
//     and CONCAT never meets an "illegal mix of collations";
//   - numbers, temporals, FLOAT and DOUBLE use the server's own text form,
//     which is what a dump writes and a load reads back, so a value that
//     survived a text round trip compares equal (sessions must share a
//     time zone for TIMESTAMP; dbconn runs every session in UTC).
//
// A chunk's checksum is the count plus the sums (as exact DECIMALs) of the
// two 64-bit halves of the row hashes. Sums, unlike BIT_XOR, do not cancel
// duplicate rows, so they also compare tables without a key as multisets.

// hashedCols are the columns that enter the row hash.
func hashedCols(t *sluice.Table) []int { return t.WritableColumns() }

// columnPiece is the canonical text of one column, NULL-safe.
func columnPiece(c sluice.Column) string {
	q := sluice.QuoteIdent(c.Name)
	utf := "CONVERT(" + q + " USING utf8mb4) COLLATE utf8mb4_bin"
	switch strings.ToLower(c.DataType) {
	case "char", "varchar", "tinytext", "enum", "set":
		return lengthPrefixed(utf)
	case "text", "mediumtext", "longtext", "json":
		return "IFNULL(MD5(" + utf + "), 'N')"
	case "blob", "mediumblob", "longblob",
		"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return "IFNULL(MD5(" + q + "), 'N')"
	case "bit":
		// BIT values are raw bytes; as a number they print the same whatever
		// the column's width in bytes.
		return lengthPrefixed(q + " + 0")
	}
	return lengthPrefixed(q)
}

func lengthPrefixed(e string) string {
	return "IFNULL(CONCAT(LENGTH(" + e + "), ':', " + e + "), 'N')"
}

// rowHashExpr is the SQL expression for a row's 32-hex-digit MD5.
func rowHashExpr(t *sluice.Table) string {
	cols := hashedCols(t)
	parts := make([]string, len(cols))
	for i, ci := range cols {
		parts[i] = columnPiece(t.Columns[ci])
	}
	return "MD5(CONCAT(" + strings.Join(parts, ", ") + "))"
}

// checksumQuery returns the query that yields COUNT, SUM(high half) and
// SUM(low half) for the rows of ref within the range condition where. t is
// the source definition: the same expression runs on both servers, and ref
// is the name on the server it runs on.
//
// The LIMIT keeps the optimizer from merging the derived table into the
// outer query: merged, each of the two references to h evaluates the row's
// MD5 again, which measured about twice as slow as materializing the
// chunk's hashes (32 bytes a row) in a temporary table.
func checksumQuery(t *sluice.Table, ref sluice.TableRef, where string) string {
	return fmt.Sprintf("SELECT COUNT(*), "+
		"COALESCE(SUM(CAST(CONV(LEFT(h, 16), 16, 10) AS UNSIGNED)), 0), "+
		"COALESCE(SUM(CAST(CONV(RIGHT(h, 16), 16, 10) AS UNSIGNED)), 0) "+
		"FROM (SELECT %s AS h FROM %s WHERE %s LIMIT 18446744073709551615) AS v", rowHashExpr(t), ref.Quoted(), where)
}

// rowsQuery returns the key columns and the row hash of every row of ref in
// the range, in key order, for the drill-down.
func rowsQuery(t *sluice.Table, ref sluice.TableRef, where string) string {
	keys := sqlgen.ColumnList(chunk.KeyColumns(t))
	return fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s ORDER BY %s", keys, rowHashExpr(t), ref.Quoted(), where, keys)
}

// hashesQuery returns every row's hash, for tables without a key.
func hashesQuery(t *sluice.Table, ref sluice.TableRef) string {
	return fmt.Sprintf("SELECT %s FROM %s", rowHashExpr(t), ref.Quoted())
}
