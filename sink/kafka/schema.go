package kafka

import (
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// The Kafka Connect schema of Debezium's events (JsonConverter with
// schemas.enable=true), written only with Config.Schema.

// recordKey is the record's key: the key columns by name, wrapped with
// their schema when Config.Schema; nil for a table without a key (Debezium
// sends those with a null key).
func (e *encoder) recordKey(tb *sluice.Table, row []any) []byte {
	if len(tb.PK) == 0 || row == nil {
		return nil
	}
	if !e.cfg.Schema {
		return e.appendKey(nil, tb, row)
	}
	p := e.plan(tb)
	dst := []byte(`{"schema":{"type":"struct","fields":[`)
	for i, k := range tb.PK {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, columnSchema(tb.Columns[k], &p.cols[k], false)...)
	}
	dst = append(dst, `],"optional":false,"name":`...)
	dst = appendJSONString(dst, p.topic+".Key")
	dst = append(dst, `},"payload":`...)
	dst = e.appendKey(dst, tb, row)
	return append(dst, '}')
}

// envelopeSchema is the schema of a table's change events, built once.
func (e *encoder) envelopeSchema(tb *sluice.Table) string {
	p := e.plan(tb)
	if p.schema != "" {
		return p.schema
	}
	var b strings.Builder
	value := func(field string) {
		b.WriteString(`{"type":"struct","fields":[`)
		for i, c := range tb.Columns {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(columnSchema(c, &p.cols[i], true))
		}
		b.WriteString(`],"optional":true,"name":` + jsonString(p.topic+".Value") + `,"field":"` + field + `"}`)
	}
	b.WriteString(`{"type":"struct","fields":[`)
	value("before")
	b.WriteByte(',')
	value("after")
	// Debezium 2.7's order (SchemaFactory.datatypeEnvelopeSchema): the
	// transaction block before op and the times, and version 2.
	b.WriteString(`,` + sourceSchema + `,` +
		`{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},` +
		`{"type":"int64","optional":false,"field":"data_collection_order"}],"optional":true,"name":"event.block","version":1,"field":"transaction"},` +
		`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},` +
		`{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"}]` +
		`,"optional":false,"name":` + jsonString(p.topic+".Envelope") + `,"version":2}`)
	p.schema = b.String()
	return p.schema
}

const sourceSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},` +
	`{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},` +
	`{"type":"int64","optional":true,"field":"ts_us"},{"type":"int64","optional":true,"field":"ts_ns"},{"type":"string","optional":true,"field":"table"},` +
	`{"type":"int64","optional":false,"field":"server_id"},{"type":"string","optional":true,"field":"gtid"},{"type":"string","optional":false,"field":"file"},` +
	`{"type":"int64","optional":false,"field":"pos"},{"type":"int32","optional":false,"field":"row"},{"type":"int64","optional":true,"field":"thread"},` +
	`{"type":"string","optional":true,"field":"query"}],"optional":false,"name":"io.debezium.connector.mysql.Source","field":"source"}`

// columnSchema is one column's field schema, with the types and logical
// names Debezium's MySQL connector uses.
func columnSchema(c sluice.Column, cp *colPlan, optional bool) string {
	typ, name, params := "string", "", ""
	switch cp.kind {
	case kNumber:
		typ = intType(c)
	case kDecimal:
		scale, prec := decimalArgs(c.FullType)
		params = `"parameters":{"scale":"` + strconv.Itoa(scale) + `","connect.decimal.precision":"` + strconv.Itoa(prec) + `"}`
		switch cp.e.cfg.DecimalHandling {
		case "string":
		case "double":
			typ = "double"
		default:
			typ, name = "bytes", "org.apache.kafka.connect.data.Decimal"
		}
	case kBool:
		typ = "boolean"
	case kBits:
		typ, name = "bytes", "io.debezium.data.Bits"
		params = `"parameters":{"length":"` + strconv.Itoa(cp.bits) + `"}`
	case kDate:
		typ, name = "int32", "io.debezium.time.Date"
	case kDatetime:
		typ, name = "int64", "io.debezium.time.Timestamp"
		if cp.fsp > 3 {
			name = "io.debezium.time.MicroTimestamp"
		}
	case kTimestamp:
		name = "io.debezium.time.ZonedTimestamp"
	case kTime:
		typ, name = "int64", "io.debezium.time.MicroTime"
	case kYear:
		typ, name = "int32", "io.debezium.time.Year"
	case kEnum:
		name = "io.debezium.data.Enum"
		params = `"parameters":{"allowed":` + jsonString(strings.Join(cp.values, ",")) + `}`
	case kSet:
		name = "io.debezium.data.EnumSet"
		params = `"parameters":{"allowed":` + jsonString(strings.Join(cp.values, ",")) + `}`
	case kBytes:
		typ = "bytes"
	case kGeometry:
		return `{"type":"struct","fields":[{"type":"bytes","optional":false,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],` +
			`"optional":` + strconv.FormatBool(optional && c.Nullable) + `,"name":"io.debezium.data.geometry.Geometry","field":` + cp.name + `}`
	case kString:
		if strings.HasPrefix(strings.ToLower(c.FullType), "json") || c.DataType == "json" {
			name = "io.debezium.data.Json"
		}
	}
	s := `{"type":"` + typ + `","optional":` + strconv.FormatBool(optional && c.Nullable)
	if name != "" {
		s += `,"name":"` + name + `","version":1`
	}
	if params != "" {
		s += "," + params
	}
	if d, ok := defaultJSON(c, cp); ok {
		s += `,"default":` + d // after parameters, as JsonConverter writes it
	}
	return s + `,"field":` + cp.name + `}`
}

// intType maps integer and float columns as Debezium does: TINYINT and
// SMALLINT to int16, MEDIUMINT and INT to int32 (unsigned INT to int64),
// BIGINT to int64, FLOAT to float32 and DOUBLE to float64.
func intType(c sluice.Column) string {
	base := strings.ToLower(c.FullType)
	if i := strings.IndexAny(base, "( "); i >= 0 {
		base = base[:i]
	}
	if base == "" {
		base = c.DataType
	}
	switch base {
	case "tinyint", "bool", "boolean":
		return "int16"
	case "smallint":
		if c.Unsigned {
			return "int32"
		}
		return "int16"
	case "mediumint":
		return "int32"
	case "int", "integer":
		if c.Unsigned {
			return "int64"
		}
		return "int32"
	case "float":
		return "float"
	case "double", "real":
		return "double"
	}
	return "int64"
}

// decimalArgs reads (precision, scale) from "decimal(10,2) unsigned".
func decimalArgs(full string) (scale, prec int) {
	prec = 10
	i := strings.IndexByte(full, '(')
	j := strings.IndexByte(full, ')')
	if i < 0 || j < i {
		return 0, prec
	}
	a, b, _ := strings.Cut(full[i+1:j], ",")
	if n, err := strconv.Atoi(strings.TrimSpace(a)); err == nil {
		prec = n
	}
	scale, _ = strconv.Atoi(strings.TrimSpace(b))
	return scale, prec
}
