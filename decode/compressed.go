package decode

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// ErrCompressedColumn: MariaDB's COMPRESSED columns (BLOB/TEXT/VARCHAR
// ... COMPRESSED, 10.3+) are written to the binlog as types 140 and 141,
// which go-mysql cannot read: their table map's metadata is misread and
// their rows fail to decode. sluice refuses them by name (sluice check,
// a DDL that makes one, a row of such a table) instead of stopping on a
// bare decoding error.
var ErrCompressedColumn = errors.New("a MariaDB COMPRESSED column, whose row images sluice cannot read")

// MariaDB's binlog types of compressed columns (MYSQL_TYPE_BLOB_COMPRESSED,
// MYSQL_TYPE_VARCHAR_COMPRESSED).
const (
	typeBlobCompressed    = 140
	typeVarcharCompressed = 141
)

// compressedHint is the fix: nothing the task has applied is wrong, and no
// later change of the table can be applied, so the table leaves the task
// or its column stops being compressed, and then its rows are copied again.
const compressedHint = "exclude the table from the task (tables.exclude) and restart, or make the column plain on the source (ALTER TABLE ... MODIFY the column without COMPRESSED) and copy the table again with a new task"

// compressedTableMap refuses a table map of a replicated table with a
// COMPRESSED column.
func (d *Decoder) compressedTableMap(ev *replication.BinlogEvent, tm *replication.TableMapEvent, pos sluice.Position) error {
	for i, t := range tm.ColumnType {
		if t != typeBlobCompressed && t != typeVarcharCompressed {
			continue
		}
		ref := sluice.TableRef{Schema: string(tm.Schema), Name: string(tm.Table)}
		if !d.selected(ref) {
			return nil
		}
		col := fmt.Sprintf("column %d", i+1)
		if i < len(tm.ColumnName) {
			col += " (" + string(tm.ColumnName[i]) + ")"
		}
		return d.refuseEvent(ev, pos, fmt.Sprintf("%v: %s %s", ErrCompressedColumn, ref.Quoted(), col), compressedHint)
	}
	return nil
}

// hasCompressedColumn reports whether a statement gives a column the
// COMPRESSED attribute (also inside MariaDB's /*M!100301 ... */ comment),
// not ROW_FORMAT=COMPRESSED, an InnoDB table option.
func hasCompressedColumn(q string) bool {
	ws := words(q, 1<<20)
	if len(ws) < 2 || ws[0].w != "CREATE" && ws[0].w != "ALTER" {
		return false
	}
	for i, w := range ws {
		if w.w == "COMPRESSED" && (i == 0 || ws[i-1].w != "ROW_FORMAT") {
			return true
		}
	}
	return false
}

// compressedDDL refuses a DDL that gives a column of a replicated schema
// the COMPRESSED attribute, before anything of it is applied (the parser
// cannot read the attribute either).
func (d *Decoder) compressedDDL(defaultSchema, q string, pos sluice.Position) error {
	if !hasCompressedColumn(q) {
		return nil
	}
	if defaultSchema != "" && !d.schemaSelected(defaultSchema) && !mentionsSelected(q, d) || defaultSchema == "" && !mentionsSelected(q, d) {
		return nil
	}
	return &sluice.Error{
		Op:   fmt.Sprintf("replicate DDL at %s (GTID %s): %s", posString(pos), d.gtidOrNone(), oneLine(q)),
		Err:  fmt.Errorf("%w: %v", sluice.ErrUnsupportedDDL, ErrCompressedColumn),
		Hint: compressedHint + "; the statement has not run on the target",
	}
}

// hasCompressedType reports whether a table map has a COMPRESSED column.
func hasCompressedType(tm *replication.TableMapEvent) bool {
	if tm == nil {
		return false
	}
	for _, t := range tm.ColumnType {
		if t == typeBlobCompressed || t == typeVarcharCompressed {
			return true
		}
	}
	return false
}
