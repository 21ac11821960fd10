package kafka

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// Debezium's schema change event carries, besides the DDL text, the
// tables it changed as they are after it: tableChanges, an array of
// {type: CREATE|ALTER|DROP, id: "db"."table", table: {...}}. The shape is
// Debezium 2.7's ConnectTableChangeSerializer (io.debezium.relational.
// history; its schema is built in io.debezium.schema.SchemaFactory), and
// the column types follow its MySQL DDL parser (MySqlAntlrDdlParser's
// data type entries: jdbcType is a java.sql.Types code).

// tableChange is one element of tableChanges.
type tableChange struct {
	kind string // CREATE, ALTER or DROP
	ref  sluice.TableRef
	tb   *sluice.Table // nil for DROP
}

// ddlTableChanges lists the tables a DDL item changed, as the schema
// tracker has them after it (the item's SchemaState). Statements on
// whole schemas, and DDL the tracker does not follow, have none, as in
// Debezium.
func ddlTableChanges(it *sluice.StreamItem) []tableChange {
	if len(it.Tables) == 0 || it.SchemaState == nil {
		return nil
	}
	kind := ddlKind(it.Source)
	if kind == "" {
		return nil
	}
	tr := schema.NewTracker()
	if err := tr.Restore(it.SchemaState); err != nil {
		return nil
	}
	var out []tableChange
	for _, ref := range it.Tables {
		tb := tr.Table(ref)
		switch {
		case kind == "DROP":
			out = append(out, tableChange{kind: "DROP", ref: ref})
		case tb != nil:
			out = append(out, tableChange{kind: kind, ref: ref, tb: tb})
		}
		// A table gone by an ALTER or RENAME (its old name) has no
		// change of its own: Debezium reports the table under its new id.
	}
	return out
}

// ddlKind is the tableChanges type of a statement, from its first words.
func ddlKind(stmt string) string {
	w := strings.Fields(strings.ToUpper(stripLeadingComments(stmt)))
	if len(w) < 2 {
		return ""
	}
	switch {
	case w[0] == "CREATE" && (w[1] == "TABLE" || w[1] == "TEMPORARY" || w[1] == "OR"):
		return "CREATE"
	case w[0] == "DROP" && (w[1] == "TABLE" || w[1] == "TEMPORARY"):
		return "DROP"
	case w[0] == "ALTER", w[0] == "RENAME":
		return "ALTER"
	case (w[0] == "CREATE" || w[0] == "DROP") && slices.Contains(w[1:min(3, len(w))], "INDEX"):
		return "ALTER" // CREATE [UNIQUE] INDEX, DROP INDEX
	}
	return ""
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "/*") {
			if i := strings.Index(s, "*/"); i >= 0 {
				s = s[i+2:]
				continue
			}
		}
		return s
	}
}

// appendTableChanges appends the tableChanges array.
func appendTableChanges(dst []byte, changes []tableChange) []byte {
	dst = append(dst, '[')
	for i, c := range changes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"`...)
		dst = append(dst, c.kind...)
		dst = append(dst, `","id":`...)
		dst = appendJSONString(dst, `"`+c.ref.Schema+`"."`+c.ref.Name+`"`)
		dst = append(dst, `,"table":`...)
		if c.tb == nil {
			dst = append(dst, "null}"...)
			continue
		}
		dst = appendTable(dst, c.tb)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendTable is Debezium's Table struct: defaultCharsetName,
// primaryKeyColumnNames, columns, comment. The tracker keeps neither the
// table's default charset nor its comment: both are null.
func appendTable(dst []byte, tb *sluice.Table) []byte {
	dst = append(dst, `{"defaultCharsetName":null,"primaryKeyColumnNames":[`...)
	if tb.PKIsPrimary {
		for i, k := range tb.PK {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, tb.Columns[k].Name)
		}
	}
	dst = append(dst, `],"columns":[`...)
	for i, c := range tb.Columns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendColumn(dst, c, i+1, tb.PKIsPrimary && inInts(tb.PK, i))
	}
	return append(dst, `],"comment":null}`...)
}

func inInts(a []int, v int) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// appendColumn is Debezium's Column struct, in its schema's field order.
func appendColumn(dst []byte, c sluice.Column, position int, pk bool) []byte {
	typeName, length, scale := columnType(c)
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, c.Name)
	dst = append(dst, `,"jdbcType":`...)
	dst = strconv.AppendInt(dst, int64(jdbcType(c.DataType)), 10)
	dst = append(dst, `,"nativeType":null,"typeName":`...)
	dst = appendJSONString(dst, typeName)
	dst = append(dst, `,"typeExpression":`...)
	dst = appendJSONString(dst, typeName)
	dst = append(dst, `,"charsetName":`...)
	if c.Charset != "" && isCharType(c.DataType) {
		dst = appendJSONString(dst, c.Charset)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"length":`...)
	dst = appendOptInt(dst, length)
	dst = append(dst, `,"scale":`...)
	dst = appendOptInt(dst, scale)
	dst = append(dst, `,"position":`...)
	dst = strconv.AppendInt(dst, int64(position), 10)
	dst = append(dst, `,"optional":`...)
	// A primary key column is NOT NULL whatever its definition says.
	dst = strconv.AppendBool(dst, c.Nullable && !pk)
	dst = append(dst, `,"autoIncremented":`...)
	dst = strconv.AppendBool(dst, c.AutoIncrement)
	dst = append(dst, `,"generated":`...)
	// Debezium's MySQL parser marks auto-increment columns generated too.
	dst = strconv.AppendBool(dst, c.Generated || c.AutoIncrement)
	dst = append(dst, `,"comment":`...)
	if c.Comment != "" {
		dst = appendJSONString(dst, c.Comment)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"defaultValueExpression":`...)
	if c.Default != nil {
		dst = appendJSONString(dst, *c.Default)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"enumValues":`...)
	if vals := columnEnumValues(c); vals != nil {
		dst = append(dst, '[')
		for i, v := range vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			// Quoted, as the statement writes them (Debezium keeps
			// the literal's text).
			dst = appendJSONString(dst, "'"+strings.ReplaceAll(v, "'", "''")+"'")
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

func appendOptInt(dst []byte, v int) []byte {
	if v < 0 {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, int64(v), 10)
}

// columnType is the type's name as Debezium writes it (upper case, with
// UNSIGNED) and its length and scale from COLUMN_TYPE's parentheses (-1:
// none).
func columnType(c sluice.Column) (name string, length, scale int) {
	name = strings.ToUpper(c.DataType)
	if c.Unsigned {
		name += " UNSIGNED"
	}
	length, scale = -1, -1
	if enumOrSet(c.DataType) {
		// As Debezium's DDL parser: an ENUM's longest member, a SET's
		// members joined by commas.
		vals := columnEnumValues(c)
		n, most := 0, 1
		for _, v := range vals {
			n += len(v)
			most = max(most, len(v))
		}
		if c.DataType == "set" {
			return name, max(0, n+len(vals)-1), -1
		}
		return name, most, -1
	}
	ft := c.FullType
	i := strings.IndexByte(ft, '(')
	j := strings.IndexByte(ft, ')')
	if i < 0 || j < i {
		return name, length, scale
	}
	parts := strings.Split(ft[i+1:j], ",")
	if n, err := strconv.Atoi(strings.TrimSpace(parts[0])); err == nil {
		length = n
	}
	if len(parts) > 1 {
		if n, err := strconv.Atoi(strings.TrimSpace(parts[1])); err == nil {
			scale = n
		}
	}
	return name, length, scale
}

func enumOrSet(dataType string) bool { return dataType == "enum" || dataType == "set" }

func isCharType(dataType string) bool {
	switch dataType {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set":
		return true
	}
	return false
}

// columnEnumValues are the values of an ENUM or SET, unquoted (tableChanges
// writes them quoted).
func columnEnumValues(c sluice.Column) []string {
	if !enumOrSet(c.DataType) {
		return nil
	}
	i, j := strings.IndexByte(c.FullType, '('), strings.LastIndexByte(c.FullType, ')')
	if i < 0 || j < i {
		return nil
	}
	return enumValues(c.FullType[i+1 : j])
}

// jdbcType is the java.sql.Types code Debezium's MySQL DDL parser gives
// a type.
func jdbcType(dataType string) int {
	switch dataType {
	case "tinyint", "smallint":
		return 5 // SMALLINT
	case "mediumint", "int", "integer", "year":
		return 4 // INTEGER
	case "bigint":
		return -5 // BIGINT
	case "float":
		return 6 // FLOAT
	case "double", "double precision":
		return 8 // DOUBLE
	case "real":
		return 7 // REAL
	case "decimal", "dec", "fixed":
		return 3 // DECIMAL
	case "numeric":
		return 2 // NUMERIC
	case "bit":
		return -7 // BIT
	case "bool", "boolean":
		return 16 // BOOLEAN
	case "date":
		return 91 // DATE
	case "time":
		return 92 // TIME
	case "datetime":
		return 93 // TIMESTAMP
	case "timestamp":
		return 2014 // TIMESTAMP_WITH_TIMEZONE
	case "char", "enum", "set":
		return 1 // CHAR
	case "varchar", "tinytext", "text", "mediumtext", "longtext":
		return 12 // VARCHAR
	case "binary":
		return -2 // BINARY
	case "varbinary":
		return -3 // VARBINARY
	case "tinyblob", "blob", "mediumblob", "longblob":
		return 2004 // BLOB
	}
	return 1111 // OTHER: json, geometry and the spatial types
}
