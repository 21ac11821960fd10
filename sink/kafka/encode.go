package kafka

import (
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-db/sluice"
)

// DebeziumVersion is what source.version says: the Debezium release whose
// MySQL connector's event format these events follow.
const DebeziumVersion = "2.7.4.Final"

// txnMeta is what every event of one source transaction shares.
type txnMeta struct {
	gtid   string
	ts     uint32          // source time, unix seconds
	start  sluice.Position // where the transaction starts in the source binlog
	server uint32
}

// encoder turns row changes into Debezium's (or Canal's) JSON. It keeps the
// per-table column plans, so an event costs one pass over its values.
type encoder struct {
	cfg   Config
	plans map[*sluice.Table]*tablePlan
}

func newEncoder(cfg Config) *encoder {
	return &encoder{cfg: cfg, plans: map[*sluice.Table]*tablePlan{}}
}

// colKind is how a column's values are written, as Debezium maps its type
// (docs: "How Debezium MySQL connectors map data types", with the default
// decimal.handling.mode=precise, time.precision.mode=adaptive_time_microseconds,
// bigint.unsigned.handling.mode=long, binary.handling.mode=bytes).
type colKind uint8

const (
	kNumber    colKind = iota // integers, FLOAT, DOUBLE: JSON numbers
	kString                   // CHAR, VARCHAR, TEXT, JSON: JSON strings
	kBytes                    // BINARY, VARBINARY, BLOB: base64 strings
	kDecimal                  // DECIMAL: precise (base64 of the unscaled two's complement), or string/double
	kBool                     // BIT(1): true/false
	kBits                     // BIT(n>1): base64 of the little-endian bytes
	kDate                     // DATE: days since the epoch (io.debezium.time.Date)
	kDatetime                 // DATETIME(0-3): ms since the epoch (io.debezium.time.Timestamp); (4-6): µs (MicroTimestamp)
	kTimestamp                // TIMESTAMP: ISO-8601 in UTC (io.debezium.time.ZonedTimestamp)
	kTime                     // TIME: µs (io.debezium.time.MicroTime)
	kYear                     // YEAR: the year (io.debezium.time.Year)
	kEnum                     // ENUM: the value's text (io.debezium.data.Enum)
	kSet                      // SET: the values' text joined by commas (io.debezium.data.EnumSet)
	kGeometry                 // GEOMETRY: {"wkb": base64, "srid": n} (io.debezium.data.geometry.Geometry)
)

type colPlan struct {
	e      *encoder
	name   string // JSON-quoted
	kind   colKind
	fsp    int      // DATETIME fractional digits
	bits   int      // BIT(n)
	values []string // ENUM/SET members, in order
}

type tablePlan struct {
	cols   []colPlan
	topic  string
	schema string // the Connect schema of the envelope, when Config.Schema
	// size is a moving average of the table's encoded values: a value's
	// buffer is allocated once at about its final size, instead of growing
	// from empty through several copies (a fifth of the Kafka sink's
	// allocation on bench-kafka's backlog was that growth).
	size int
}

// valueBuf returns an empty buffer for one of the table's values. Each
// value needs its own: the record keeps it until the broker acknowledges.
func (p *tablePlan) valueBuf() []byte { return make([]byte, 0, p.size+p.size/8+64) }

// encoded feeds a value's length into the table's moving average.
func (p *tablePlan) encoded(v []byte) []byte {
	p.size += (len(v) - p.size) / 8
	return v
}

func (e *encoder) plan(tb *sluice.Table) *tablePlan {
	if p := e.plans[tb]; p != nil {
		return p
	}
	p := &tablePlan{topic: e.cfg.TopicPrefix + "." + tb.Ref.Schema + "." + tb.Ref.Name}
	for _, c := range tb.Columns {
		cp := planColumn(c)
		cp.e = e
		p.cols = append(p.cols, cp)
	}
	e.plans[tb] = p
	return p
}

func planColumn(c sluice.Column) colPlan {
	full := strings.ToLower(c.FullType)
	base := full
	if i := strings.IndexAny(base, "( "); i >= 0 {
		base = base[:i]
	}
	if base == "" {
		base = strings.ToLower(c.DataType)
	}
	cp := colPlan{name: string(appendJSONString(nil, c.Name))}
	args := ""
	if i := strings.IndexByte(full, '('); i >= 0 {
		if j := strings.LastIndexByte(full, ')'); j > i {
			args = c.FullType[i+1 : j]
		}
	}
	switch base {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "float", "double", "real", "bool", "boolean":
		cp.kind = kNumber
	case "decimal", "numeric", "dec", "fixed":
		cp.kind = kDecimal
	case "bit":
		n, err := strconv.Atoi(strings.TrimSpace(args))
		if err != nil || n <= 0 {
			n = 64
		}
		cp.bits = n
		cp.kind = kBits
		if n == 1 {
			cp.kind = kBool
		}
	case "date":
		cp.kind = kDate
	case "datetime":
		cp.kind = kDatetime
		cp.fsp, _ = strconv.Atoi(strings.TrimSpace(args))
	case "timestamp":
		cp.kind = kTimestamp
	case "time":
		cp.kind = kTime
	case "year":
		cp.kind = kYear
	case "enum":
		cp.kind, cp.values = kEnum, enumValues(args)
	case "set":
		cp.kind, cp.values = kSet, enumValues(args)
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		cp.kind = kBytes
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		cp.kind = kGeometry
	default:
		cp.kind = kString
	}
	return cp
}

// enumValues splits "'a','b,c','it”s'" into its members.
func enumValues(args string) []string {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(args); i++ {
		ch := args[i]
		switch {
		case !in && ch == '\'':
			in = true
			cur.Reset()
		case in && ch == '\'' && i+1 < len(args) && args[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case in && ch == '\'':
			in = false
			out = append(out, cur.String())
		case in && ch == '\\' && i+1 < len(args):
			i++
			cur.WriteByte(args[i])
		case in:
			cur.WriteByte(ch)
		}
	}
	return out
}

// appendKey writes the record key: Debezium's key struct, the key columns
// by name ({"id":1}), or nil for a table without a key.
func (e *encoder) appendKey(dst []byte, tb *sluice.Table, row []any) []byte {
	if len(tb.PK) == 0 {
		return nil
	}
	p := e.plan(tb)
	dst = append(dst, '{')
	for i, k := range tb.PK {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p.cols[k].name...)
		dst = append(dst, ':')
		var v any
		if k < len(row) {
			v = row[k]
		}
		dst = e.appendValue(dst, &p.cols[k], v)
	}
	return append(dst, '}')
}

func (e *encoder) appendRow(dst []byte, p *tablePlan, row []any) []byte {
	if row == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	for i := range p.cols {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p.cols[i].name...)
		dst = append(dst, ':')
		var v any
		if i < len(row) {
			v = row[i]
		}
		dst = e.appendValue(dst, &p.cols[i], v)
	}
	return append(dst, '}')
}

// appendSource writes Debezium's source block.
func (e *encoder) appendSource(dst []byte, m *txnMeta, ref sluice.TableRef, row int, snapshot string) []byte {
	dst = append(dst, `{"version":"`+DebeziumVersion+`","connector":"mysql","name":`...)
	dst = appendJSONString(dst, e.cfg.TopicPrefix)
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, int64(m.ts)*1000, 10)
	dst = append(dst, `,"snapshot":"`...)
	dst = append(dst, snapshot...)
	dst = append(dst, `","db":`...)
	dst = appendJSONString(dst, ref.Schema)
	// ts_us and ts_ns (Debezium 2.6+): the same source time, in µs and ns.
	dst = append(dst, `,"sequence":null,"ts_us":`...)
	dst = strconv.AppendInt(dst, int64(m.ts)*1000000, 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, int64(m.ts)*1000000000, 10)
	dst = append(dst, `,"table":`...)
	if ref.Name == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, ref.Name)
	}
	dst = append(dst, `,"server_id":`...)
	dst = strconv.AppendUint(dst, uint64(m.server), 10)
	dst = append(dst, `,"gtid":`...)
	if m.gtid == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, m.gtid)
	}
	dst = append(dst, `,"file":`...)
	dst = appendJSONString(dst, m.start.File)
	dst = append(dst, `,"pos":`...)
	dst = strconv.AppendUint(dst, uint64(m.start.Pos), 10)
	dst = append(dst, `,"row":`...)
	dst = strconv.AppendInt(dst, int64(row), 10)
	dst = append(dst, `,"thread":null,"query":null}`...)
	return dst
}

// debeziumValue writes one change event's value (payload only; the
// Connect schema is left out unless Config.Schema).
func (e *encoder) debeziumValue(dst []byte, ch *sluice.RowChange, m *txnMeta, row int, op byte, now time.Time) []byte {
	p := e.plan(ch.Table)
	if e.cfg.Schema {
		dst = append(dst, `{"schema":`...)
		dst = append(dst, e.envelopeSchema(ch.Table)...)
		dst = append(dst, `,"payload":`...)
	}
	dst = append(dst, `{"before":`...)
	dst = e.appendRow(dst, p, ch.Before)
	dst = append(dst, `,"after":`...)
	dst = e.appendRow(dst, p, ch.After)
	dst = append(dst, `,"source":`...)
	snap := "false"
	if op == 'r' {
		snap = "true"
	}
	dst = e.appendSource(dst, m, ch.Table.Ref, row, snap)
	dst = append(dst, `,"transaction":null,"op":"`...)
	dst = append(dst, op)
	dst = append(dst, `","ts_ms":`...)
	dst = strconv.AppendInt(dst, now.UnixMilli(), 10)
	dst = append(dst, `,"ts_us":`...)
	dst = strconv.AppendInt(dst, now.UnixMicro(), 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, now.UnixNano(), 10)
	dst = append(dst, '}')
	if e.cfg.Schema {
		dst = append(dst, '}')
	}
	return dst
}

// ddlValue is Debezium's schema change event.
func (e *encoder) ddlValue(dst []byte, it *sluice.StreamItem, m *txnMeta, db string, now time.Time) []byte {
	dst = append(dst, `{"source":`...)
	// source.table names the statement's tables, comma-separated, as
	// Debezium's does (null for statements on whole schemas).
	names := make([]string, 0, len(it.Tables))
	for _, t := range it.Tables {
		names = append(names, t.Name)
	}
	dst = e.appendSource(dst, m, sluice.TableRef{Schema: db, Name: strings.Join(names, ",")}, 0, "false")
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, now.UnixMilli(), 10)
	dst = append(dst, `,"databaseName":`...)
	dst = appendJSONString(dst, db)
	dst = append(dst, `,"schemaName":null,"ddl":`...)
	stmt := it.Source
	if stmt == "" {
		stmt = strings.Join(it.DDL, ";\n")
	}
	dst = appendJSONString(dst, stmt)
	dst = append(dst, `,"tableChanges":`...)
	dst = appendTableChanges(dst, ddlTableChanges(it))
	return append(dst, '}')
}

func (e *encoder) appendValue(dst []byte, c *colPlan, v any) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	switch c.kind {
	case kNumber:
		return appendNumber(dst, v)
	case kDecimal:
		s := toString(v)
		switch e.cfg.DecimalHandling {
		case "string":
			return appendJSONString(dst, s)
		case "double":
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return appendJSONString(dst, s)
			}
			return strconv.AppendFloat(dst, f, 'g', -1, 64)
		}
		return appendJSONString(dst, preciseDecimal(s))
	case kBool:
		if n, ok := toInt64(v); ok {
			return strconv.AppendBool(dst, n != 0)
		}
	case kBits:
		if n, ok := toInt64(v); ok {
			b := make([]byte, (c.bits+7)/8)
			for i := range b {
				b[i] = byte(uint64(n) >> (8 * i))
			}
			return appendBase64(dst, b)
		}
	case kDate:
		s := toString(v)
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return append(dst, "null"...) // zero date: Debezium writes null
		}
		return strconv.AppendInt(dst, t.Unix()/86400, 10)
	case kDatetime:
		t, err := parseDatetime(toString(v))
		if err != nil {
			return append(dst, "null"...)
		}
		if c.fsp > 3 {
			return strconv.AppendInt(dst, t.UnixMicro(), 10)
		}
		return strconv.AppendInt(dst, t.UnixMilli(), 10)
	case kTimestamp:
		t, err := parseDatetime(toString(v))
		if err != nil {
			return append(dst, "null"...)
		}
		return appendJSONString(dst, t.UTC().Format(time.RFC3339Nano))
	case kTime:
		if us, ok := parseTimeMicros(toString(v)); ok {
			return strconv.AppendInt(dst, us, 10)
		}
	case kYear:
		return appendNumber(dst, v)
	case kEnum:
		if n, ok := toInt64(v); ok {
			if n >= 1 && int(n) <= len(c.values) {
				return appendJSONString(dst, c.values[n-1])
			}
			if n == 0 {
				return appendJSONString(dst, "")
			}
		}
	case kSet:
		if n, ok := toInt64(v); ok && len(c.values) > 0 {
			var parts []string
			for i, name := range c.values {
				if uint64(n)&(1<<uint(i)) != 0 {
					parts = append(parts, name)
				}
			}
			return appendJSONString(dst, strings.Join(parts, ","))
		}
	case kBytes:
		return appendBase64(dst, toBytes(v))
	case kGeometry:
		b := toBytes(v)
		if len(b) >= 4 {
			srid := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
			dst = append(dst, `{"wkb":`...)
			dst = appendBase64(dst, b[4:])
			dst = append(dst, `,"srid":`...)
			dst = strconv.AppendUint(dst, uint64(srid), 10)
			return append(dst, '}')
		}
	case kString:
		switch x := v.(type) {
		case string:
			return appendJSONString(dst, x)
		case []byte:
			if utf8.Valid(x) {
				return appendJSONString(dst, string(x))
			}
			return appendBase64(dst, x)
		}
		if _, ok := toInt64(v); ok {
			return appendNumber(dst, v)
		}
	}
	// A value the column's plan does not expect (a type the tracker did
	// not know): keep it rather than drop it.
	switch x := v.(type) {
	case string:
		return appendJSONString(dst, x)
	case []byte:
		return appendBase64(dst, x)
	}
	return appendNumber(dst, v)
}

func appendNumber(dst []byte, v any) []byte {
	switch x := v.(type) {
	case int8:
		return strconv.AppendInt(dst, int64(x), 10)
	case int16:
		return strconv.AppendInt(dst, int64(x), 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, float64(x), 'g', -1, 32)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, x, 'g', -1, 64)
	case string:
		return appendJSONString(dst, x)
	case []byte:
		return appendJSONString(dst, string(x))
	case bool:
		return strconv.AppendBool(dst, x)
	}
	return append(dst, "null"...)
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), true
	}
	return 0, false
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return string(appendNumber(nil, v))
}

func toBytes(v any) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return appendNumber(nil, v)
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// preciseDecimal is Kafka Connect's Decimal in JSON: the unscaled value's
// big-endian two's complement bytes, base64 (the scale is in the schema).
func preciseDecimal(s string) string {
	digits := strings.Replace(s, ".", "", 1)
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return s
	}
	return base64.StdEncoding.EncodeToString(twosComplement(n))
}

func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n = 2^k - |n| for the smallest k whose top bit is set.
	l := (n.BitLen() + 8) / 8
	mod := new(big.Int).Lsh(big.NewInt(1), uint(l*8))
	b := new(big.Int).Add(mod, n).Bytes()
	for len(b) < l {
		b = append([]byte{0xff}, b...)
	}
	return b
}

func parseDatetime(s string) (time.Time, error) {
	return time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
}

// parseTimeMicros reads a TIME value ("-838:59:59.000000") as µs.
func parseTimeMicros(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return 0, false
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	sec, frac, _ := strings.Cut(parts[2], ".")
	sv, err3 := strconv.ParseInt(sec, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, false
	}
	us := ((h*60+m)*60 + sv) * 1e6
	if frac != "" {
		frac = (frac + "000000")[:6]
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil {
			return 0, false
		}
		us += f
	}
	if neg {
		us = -us
	}
	return us, true
}

// jsonString is s as a JSON string.
func jsonString(s string) string { return string(appendJSONString(nil, s)) }

// appendJSONString writes s as a JSON string (strconv.Quote is Go syntax,
// not JSON: it writes \x and \U escapes).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
