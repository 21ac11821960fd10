// Package sqlgen builds SQL text for the replication applier: a table spec
// in, SQL out. Builders come in two forms: Append* writes values as
// literals into a reusable buffer (the hot path: a whole batch of statements
// goes to the server in one round trip), and the (sql, args) forms use
// placeholders for callers that prefer prepared statements.
package sqlgen

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// AppendValue appends v as a MySQL literal. Strings are escaped for a
// session without NO_BACKSLASH_ESCAPES (the applier sets its sql_mode);
// []byte is written as a _binary literal so arbitrary bytes survive the
// utf8mb4 connection character set unchanged.
func AppendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "NULL"...)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int8:
		return strconv.AppendInt(b, int64(x), 10)
	case int16:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case bool:
		if x {
			return append(b, '1')
		}
		return append(b, '0')
	case float32:
		return appendFloat(b, float64(x), 32)
	case float64:
		return appendFloat(b, x, 64)
	case string:
		return AppendQuoted(b, x)
	case []byte:
		b = append(b, "_binary"...)
		return appendQuotedBytes(b, x)
	case time.Time:
		b = append(b, '\'')
		b = x.AppendFormat(b, "2006-01-02 15:04:05.999999")
		return append(b, '\'')
	case fmt.Stringer:
		// decimal.Decimal and similar exact types print their exact value.
		return AppendQuoted(b, x.String())
	default:
		return AppendQuoted(b, fmt.Sprint(x))
	}
}

func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "NULL"...)
	}
	// The shortest form that parses back to the same float32/float64.
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

// AppendQuoted appends s as a single-quoted, backslash-escaped literal.
func AppendQuoted(b []byte, s string) []byte {
	b = append(b, '\'')
	for i := 0; i < len(s); i++ {
		b = appendEscaped(b, s[i])
	}
	return append(b, '\'')
}

func appendQuotedBytes(b []byte, s []byte) []byte {
	b = append(b, '\'')
	for _, c := range s {
		b = appendEscaped(b, c)
	}
	return append(b, '\'')
}

func appendEscaped(b []byte, c byte) []byte {
	switch c {
	case 0:
		return append(b, '\\', '0')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case 0x1a:
		return append(b, '\\', 'Z')
	case '\'':
		return append(b, '\\', '\'')
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	}
	return append(b, c)
}

// AppendIdent appends a backtick-quoted identifier.
func AppendIdent(b []byte, s string) []byte {
	b = append(b, '`')
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			b = append(b, '`')
		}
		b = append(b, s[i])
	}
	return append(b, '`')
}
