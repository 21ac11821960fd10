package decode

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// Value conversions a column needs before its values can be written.
const (
	convNone        uint8 = iota
	convBytes             // non-UTF-8 text: write the raw bytes, never re-encode
	convUnsigned          // integer decoded as signed because the event lacked signedness
	convUnsigned24        // the same for MEDIUMINT, which arrives as a sign-extended int32
	convFixedBinary       // BINARY(N), UUID, INET6, INET4: restore the trailing 0x00 bytes the binlog strips
)

// tableEntry caches one source table's decoded shape. It is rebuilt when the
// table map or the tracked schema changes.
type tableEntry struct {
	selected   bool
	colTypes   []byte
	colMeta    []uint16 // lengths: BINARY(4) -> BINARY(8) keeps the types
	names      [][]byte
	shape      mapShape // the rest of the table map that shapes the table
	trackerVer uint64
	table      *sluice.Table // Ref is the target (routed) name
	conv       []uint8
	fixedLen   []int // byte length of each convFixedBinary column
	anyConv    bool
}

func (d *Decoder) selected(ref sluice.TableRef) bool {
	if !d.selectedTable(ref) {
		return false
	}
	// An online schema change's helper tables stay off the target (online.go).
	_, _, ghost := d.ghostOf(ref)
	return !ghost
}

// selectedTable is the task's table filter alone.
func (d *Decoder) selectedTable(ref sluice.TableRef) bool {
	return !systemSchemas[strings.ToLower(ref.Schema)] && (d.cfg.Selected == nil || d.cfg.Selected(ref))
}

func (d *Decoder) route(ref sluice.TableRef) sluice.TableRef {
	if d.cfg.Route == nil {
		return ref
	}
	return d.cfg.Route(ref)
}

// entry returns the cached shape for tm, rebuilding it when the table map
// differs from the cached one (a DDL happened) or the tracker changed.
func (d *Decoder) entry(tm *replication.TableMapEvent, pos sluice.Position) (*tableEntry, error) {
	d.key = append(append(append(d.key[:0], tm.Schema...), 0), tm.Table...)
	e := d.tables[string(d.key)]
	ver := d.tracker.Version()
	if e != nil && (!e.selected || (e.trackerVer == ver && bytes.Equal(e.colTypes, tm.ColumnType) && slices.Equal(e.colMeta, tm.ColumnMeta) &&
		sameNames(e.names, tm.ColumnName) && e.shape.same(tm))) {
		return e, nil
	}
	key := string(d.key)
	src := sluice.TableRef{Schema: string(tm.Schema), Name: string(tm.Table)}
	e = &tableEntry{selected: d.selected(src), colTypes: append([]byte(nil), tm.ColumnType...), colMeta: slices.Clone(tm.ColumnMeta),
		shape: shapeOf(tm), trackerVer: ver}
	for _, n := range tm.ColumnName {
		e.names = append(e.names, append([]byte(nil), n...))
	}
	d.tables[key] = e
	if !e.selected {
		return e, nil
	}
	tb, conv, err := d.buildTable(tm, src, pos)
	if err != nil {
		delete(d.tables, key)
		return nil, err
	}
	e.table, e.conv = tb, conv
	e.fixedLen = fixedBinaryLengths(tm, conv)
	for _, c := range conv {
		e.anyConv = e.anyConv || c != convNone
	}
	return e, nil
}

// mapShape is what else in a table map, besides column types, lengths and
// names, changes the decoded table: the primary key (a DROP PRIMARY KEY
// keeps every column as it is), nullability, signedness and charsets. The
// unique keys come from the tracker, so a cached entry is also rebuilt
// whenever the tracker's version moves (after any DDL).
type mapShape struct {
	pk, pkPrefix, charset, colCharset, enumCharset, enumColCharset []uint64
	nulls, signs, visible                                          []byte
}

func shapeOf(tm *replication.TableMapEvent) mapShape {
	return mapShape{slices.Clone(tm.PrimaryKey), slices.Clone(tm.PrimaryKeyPrefix), slices.Clone(tm.DefaultCharset), slices.Clone(tm.ColumnCharset),
		slices.Clone(tm.EnumSetDefaultCharset), slices.Clone(tm.EnumSetColumnCharset),
		bytes.Clone(tm.NullBitmap), bytes.Clone(tm.SignednessBitmap), bytes.Clone(tm.VisibilityBitmap)}
}

func (s *mapShape) same(tm *replication.TableMapEvent) bool {
	return slices.Equal(s.pk, tm.PrimaryKey) && slices.Equal(s.pkPrefix, tm.PrimaryKeyPrefix) && slices.Equal(s.charset, tm.DefaultCharset) &&
		slices.Equal(s.colCharset, tm.ColumnCharset) && slices.Equal(s.enumCharset, tm.EnumSetDefaultCharset) &&
		slices.Equal(s.enumColCharset, tm.EnumSetColumnCharset) && bytes.Equal(s.nulls, tm.NullBitmap) &&
		bytes.Equal(s.signs, tm.SignednessBitmap) && bytes.Equal(s.visible, tm.VisibilityBitmap)
}

func sameNames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

const binaryCollation = 63

func (d *Decoder) buildTable(tm *replication.TableMapEvent, src sluice.TableRef, pos sluice.Position) (*sluice.Table, []uint8, error) {
	n := int(tm.ColumnCount)
	tracked := d.tracker.Table(src)
	if tracked != nil && len(tracked.Columns) != n {
		tracked = nil // the tracker is behind or wrong: trust the event's own metadata, if any
	}
	tb := &sluice.Table{Ref: d.route(src), Columns: make([]sluice.Column, n)}
	conv := make([]uint8, n)
	if len(tm.ColumnName) == n {
		// Full row metadata: names, primary key, signedness, charsets.
		names := tm.ColumnNameString()
		unsigned := tm.UnsignedMap()
		coll := tm.CollationMap()
		for i := 0; i < n; i++ {
			_, nullable := tm.Nullable(i)
			c := sluice.Column{Name: names[i], DataType: typeName(tm.ColumnType[i]), Nullable: nullable, Unsigned: unsigned[i]}
			if id, ok := coll[i]; ok && rawBytesCollation(id) {
				conv[i] = convBytes
				if id == binaryCollation && fixedStringLen(tm, i) > 0 {
					conv[i] = convFixedBinary
				}
			}
			if tracked != nil && strings.EqualFold(tracked.Columns[i].Name, c.Name) {
				c.Generated = tracked.Columns[i].Generated
				c.FullType = tracked.Columns[i].FullType
				// What only the DDL says, for the Kafka sink's field
				// schemas (a JDBC sink fills rows from before an ADD
				// COLUMN with the default: issue 30 F5).
				c.Default, c.AutoIncrement, c.Comment = tracked.Columns[i].Default, tracked.Columns[i].AutoIncrement, tracked.Columns[i].Comment
			}
			tb.Columns[i] = c
		}
		for _, k := range tm.PrimaryKey {
			tb.PK = append(tb.PK, int(k))
		}
		tb.PKIsPrimary = len(tb.PK) > 0
		if tracked != nil && sameColumnNames(tracked, tb) {
			// The table map names only the primary key; unique keys come
			// from the tracker, and so does the key of a table without a
			// primary key but with a NOT NULL unique key.
			tb.UniqueKeys = tracked.UniqueKeys
			if len(tb.PK) == 0 {
				tb.PK, tb.PKIsPrimary = tracked.PK, tracked.PKIsPrimary
			}
		} else if len(tb.PK) > 0 {
			tb.UniqueKeys = [][]int{tb.PK}
		}
		return tb, conv, nil
	}
	if tracked == nil {
		return nil, nil, &sluice.Error{
			Op:   "decode rows of " + src.String() + " at " + posString(pos),
			Err:  fmt.Errorf("%w: the event has no column names and the schema tracker does not know this table with %d columns", sluice.ErrSchemaMismatch, n),
			Hint: "set binlog_row_metadata=FULL on the source, or restart replication from a position where the schema tracker was seeded",
		}
	}
	for i := 0; i < n; i++ {
		c := tracked.Columns[i]
		tb.Columns[i] = c
		switch {
		case c.Unsigned && tm.ColumnType[i] == mysql.MYSQL_TYPE_INT24:
			conv[i] = convUnsigned24
		case c.Unsigned && isIntType(tm.ColumnType[i]):
			conv[i] = convUnsigned
		case fixedBinaryTypes[strings.ToLower(c.DataType)] && fixedStringLen(tm, i) > 0:
			conv[i] = convFixedBinary
		case rawBytesCharset(c.Charset):
			if isStringType(tm.ColumnType[i]) {
				conv[i] = convBytes
			}
		}
	}
	tb.PK, tb.PKIsPrimary, tb.UniqueKeys = tracked.PK, tracked.PKIsPrimary, tracked.UniqueKeys
	return tb, conv, nil
}

// fixedBinaryTypes are the column types whose values have a fixed byte
// length and the binary collation: MariaDB logs them as MYSQL_TYPE_STRING
// and, like every CHAR, strips their trailing pad bytes (0x00 for binary).
var fixedBinaryTypes = map[string]bool{"binary": true, "uuid": true, "inet6": true, "inet4": true}

// fixedStringLen is the declared byte length of column i when the table map
// says it is a fixed-length string (CHAR, BINARY and MariaDB's UUID, INET6
// and INET4 types, which are logged as binary strings), or 0. The length
// comes from the column's metadata, decoded as go-mysql and the server do
// (the high bits of long CHAR lengths hide in the type byte).
func fixedStringLen(tm *replication.TableMapEvent, i int) int {
	if i >= len(tm.ColumnType) || i >= len(tm.ColumnMeta) || tm.ColumnType[i] != mysql.MYSQL_TYPE_STRING {
		return 0
	}
	meta := tm.ColumnMeta[i]
	if meta < 256 {
		return int(meta)
	}
	b0, b1 := uint8(meta>>8), uint8(meta&0xFF)
	if b0&0x30 != 0x30 {
		if b0|0x30 != mysql.MYSQL_TYPE_STRING {
			return 0
		}
		return int(uint16(b1) | uint16((b0&0x30)^0x30)<<4)
	}
	if b0 != mysql.MYSQL_TYPE_STRING {
		return 0 // ENUM or SET
	}
	return int(b1)
}

// fixedBinaryLengths records the byte length of each convFixedBinary column.
func fixedBinaryLengths(tm *replication.TableMapEvent, conv []uint8) []int {
	var out []int
	for i, c := range conv {
		if c != convFixedBinary {
			continue
		}
		if out == nil {
			out = make([]int, len(conv))
		}
		out[i] = fixedStringLen(tm, i)
	}
	return out
}

func sameColumnNames(a, b *sluice.Table) bool {
	for i := range a.Columns {
		if !strings.EqualFold(a.Columns[i].Name, b.Columns[i].Name) {
			return false
		}
	}
	return true
}

func isIntType(t byte) bool {
	switch t {
	case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
		return true
	}
	return false
}

func isStringType(t byte) bool {
	switch t {
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING:
		return true
	}
	return false
}

func typeName(t byte) string {
	switch t {
	case mysql.MYSQL_TYPE_FLOAT:
		return "float"
	case mysql.MYSQL_TYPE_DOUBLE:
		return "double"
	case mysql.MYSQL_TYPE_TINY:
		return "tinyint"
	case mysql.MYSQL_TYPE_SHORT:
		return "smallint"
	case mysql.MYSQL_TYPE_INT24:
		return "mediumint"
	case mysql.MYSQL_TYPE_LONG:
		return "int"
	case mysql.MYSQL_TYPE_LONGLONG:
		return "bigint"
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		return "decimal"
	case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING:
		return "varchar"
	case mysql.MYSQL_TYPE_STRING:
		return "char"
	case mysql.MYSQL_TYPE_BLOB:
		return "blob"
	case mysql.MYSQL_TYPE_JSON:
		return "json"
	case mysql.MYSQL_TYPE_BIT:
		return "bit"
	case mysql.MYSQL_TYPE_ENUM:
		return "enum"
	case mysql.MYSQL_TYPE_SET:
		return "set"
	case mysql.MYSQL_TYPE_DATE:
		return "date"
	case mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_DATETIME2:
		return "datetime"
	case mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIMESTAMP2:
		return "timestamp"
	case mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_TIME2:
		return "time"
	case mysql.MYSQL_TYPE_YEAR:
		return "year"
	case mysql.MYSQL_TYPE_GEOMETRY:
		return "geometry"
	}
	return "unknown"
}

func (d *Decoder) rows(et replication.EventType, e *replication.RowsEvent, pos sluice.Position, ts uint32) error {
	if d.cfg.Handle != nil && d.gtid != "" {
		if h := d.cfg.Handle(d.gtid, sluice.Position{}); h != nil && h.Skip {
			return nil // sluice skip: the transaction commits with no rows
		}
	}
	if e.Table == nil {
		return fmt.Errorf("decode rows at %s: no table map for table id %d", posString(pos), e.TableID)
	}
	ent, err := d.entry(e.Table, pos)
	if err != nil {
		return err
	}
	if !ent.selected {
		return nil
	}
	if len(e.SkippedColumns) > 0 {
		for _, s := range e.SkippedColumns {
			if len(s) > 0 {
				return d.partialImage(ent.table.Ref, pos)
			}
		}
	}
	var kind sluice.ChangeKind
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		kind = sluice.Insert
	case replication.EnumRowsEventTypeUpdate:
		kind = sluice.Update
	case replication.EnumRowsEventTypeDelete:
		kind = sluice.Delete
	default:
		return fmt.Errorf("decode rows at %s: unsupported rows event %s", posString(pos), et)
	}
	if ent.anyConv {
		for _, r := range e.Rows {
			convertRow(r, ent.conv, ent.fixedLen)
		}
	}
	// MariaDB's replica sets foreign_key_checks from each rows event's
	// flags (Rows_log_event::do_apply_event); so does the applier, per change.
	noFK := e.Flags&replication.NO_FOREIGN_KEY_CHECKS_F != 0
	var changes []sluice.RowChange
	if kind == sluice.Update {
		changes = make([]sluice.RowChange, 0, len(e.Rows)/2)
		for i := 0; i+1 < len(e.Rows); i += 2 {
			changes = append(changes, sluice.RowChange{Kind: kind, NoFKChecks: noFK, Table: ent.table, Before: e.Rows[i], After: e.Rows[i+1]})
		}
	} else {
		changes = make([]sluice.RowChange, len(e.Rows))
		for i, r := range e.Rows {
			changes[i] = sluice.RowChange{Kind: kind, NoFKChecks: noFK, Table: ent.table}
			if kind == sluice.Insert {
				changes[i].After = r
			} else {
				changes[i].Before = r
			}
		}
	}
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemRows, GTID: d.gtid, Timestamp: ts, Changes: changes})
	return nil
}

func convertRow(r []any, conv []uint8, fixedLen []int) {
	for i, c := range conv {
		if c == convNone || i >= len(r) || r[i] == nil {
			continue
		}
		switch c {
		case convBytes:
			if s, ok := r[i].(string); ok {
				r[i] = []byte(s)
			}
		case convFixedBinary:
			// The binlog drops trailing 0x00 bytes; the server stores and
			// compares the full length, and UUID/INET6/INET4 accept a
			// binary value only at exactly their native length.
			var b []byte
			switch v := r[i].(type) {
			case string:
				b = make([]byte, max(len(v), fixedLen[i]))
				copy(b, v)
			case []byte:
				b = make([]byte, max(len(v), fixedLen[i]))
				copy(b, v)
			default:
				continue
			}
			r[i] = b
		case convUnsigned:
			switch v := r[i].(type) {
			case int8:
				r[i] = uint8(v)
			case int16:
				r[i] = uint16(v)
			case int32:
				r[i] = uint32(v)
			case int64:
				r[i] = uint64(v)
			}
		case convUnsigned24:
			if v, ok := r[i].(int32); ok {
				r[i] = uint32(v) & 0xffffff
			}
		}
	}
}
