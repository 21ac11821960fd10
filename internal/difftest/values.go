package difftest

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
)

// Text pools. Key columns draw from small pools so that values collide:
// case and accent variants, trailing spaces, the empty string.
var (
	utf8Variants  = []string{"a", "A", "á", "Á", "à", "ä", "Ä", "e", "E", "é", "É", "è", "ß", "ss", "o", "ö", "Ö", "ø", "x", "X", "ab", "AB", "ab ", "a b", "", " ", "😀", "ｆ", "ǅ", "ǆ", "i", "İ", "ı"}
	latin1Variant = []string{"a", "A", "á", "Á", "à", "ä", "Ä", "e", "E", "é", "É", "è", "ß", "ss", "o", "ö", "Ö", "ø", "x", "X", "ab", "AB", "ab ", "a b", "", " ", "ÿ"}
	asciiVariants = []string{"a", "A", "b", "B", "ab", "AB", "Ab", "x", "X", "ab ", "", "z"}
	plainWords    = []string{"w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8"}
)

var (
	reLen     = regexp.MustCompile(`\((\d+)(?:,(\d+))?\)`)
	reQuoted  = regexp.MustCompile(`'((?:[^']|'')*)'`)
	edgeTexts = []string{"", " ", "  ", "a\x00b", "\x00", "tab\there", "quote'q", "back\\slash", "line\nfeed", "trailing  "}
)

// typeLen returns the (M) and (M,D) of a column type, or -1.
func typeLen(ct string) (int, int) {
	m := reLen.FindStringSubmatch(ct)
	if m == nil {
		return -1, -1
	}
	a, _ := strconv.Atoi(m[1])
	b := -1
	if m[2] != "" {
		b, _ = strconv.Atoi(m[2])
	}
	return a, b
}

// quote renders s as a string literal of the connection's character set.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// gen draws values for one table's columns.
type gen struct {
	r       *rand.Rand
	f       Features
	keyless bool
}

// value returns a SQL literal for c. key makes it draw from a small pool
// so that keys collide, are updated onto each other and come back.
func (g gen) value(c Col, key bool) string {
	r := g.r
	if c.Nullable && r.Intn(8) == 0 {
		return "NULL"
	}
	ct := strings.ToLower(c.ColumnType)
	unsigned := strings.Contains(ct, "unsigned")
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint":
		bits := map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}[c.DataType]
		if key || r.Intn(3) > 0 {
			v := r.Intn(40)
			if !unsigned && r.Intn(4) == 0 {
				v = -v
			}
			return strconv.Itoa(v)
		}
		if unsigned {
			max := uint64(1)<<bits - 1
			if bits == 64 {
				max = ^uint64(0)
			}
			return strconv.FormatUint(pick(r, []uint64{0, 1, max, max - 1, max / 2, uint64(r.Int63()) & max}), 10)
		}
		max := int64(1)<<(bits-1) - 1
		return strconv.FormatInt(pick(r, []int64{0, -1, max, -max - 1, max - 1, r.Int63() & max, -(r.Int63() & max)}), 10)
	case "decimal":
		p, s := typeLen(ct)
		if s < 0 {
			s = 0
		}
		intDigits := p - s
		var b strings.Builder
		if !unsigned && r.Intn(3) == 0 {
			b.WriteByte('-')
		}
		n := 1
		if intDigits > 0 {
			n = 1 + r.Intn(intDigits)
			if key {
				n = 1
			}
		}
		for i := 0; i < n; i++ {
			if intDigits == 0 {
				b.WriteByte('0')
				break
			}
			b.WriteByte(byte('0' + r.Intn(10)))
		}
		if s > 0 {
			b.WriteByte('.')
			for i := 0; i < 1+r.Intn(s); i++ {
				b.WriteByte(byte('0' + r.Intn(10)))
			}
		}
		return b.String()
	case "float", "double":
		vs := []string{"0", "1.5", "2.5", "-1.5", "3.25", "1e10", "-2.5e-5", "0.1", "123456.789", "1.0000001", "-0.0", "3.4e38"}
		if c.DataType == "double" {
			vs = append(vs, "1.7976931348623157e308", "2.2250738585072014e-308", "0.30000000000000004")
		}
		v := pick(r, vs)
		if unsigned && strings.HasPrefix(v, "-") {
			v = v[1:]
		}
		if strings.Contains(ct, ",") && (strings.Contains(v, "e3") || strings.Contains(v, "e10")) {
			v = "12.5"
		}
		return v
	case "bit":
		n, _ := typeLen(ct)
		var b strings.Builder
		b.WriteString("b'")
		for i := 0; i < 1+r.Intn(n); i++ {
			b.WriteByte(byte('0' + r.Intn(2)))
		}
		return b.String() + "'"
	case "date":
		if r.Intn(10) == 0 {
			return pick(r, []string{"'0000-00-00'", "'1000-01-01'", "'9999-12-31'", "'2024-02-29'"})
		}
		return fmt.Sprintf("'%04d-%02d-%02d'", 1990+r.Intn(40), 1+r.Intn(12), 1+r.Intn(28))
	case "datetime", "timestamp":
		year := 1000 + r.Intn(9000)
		if c.DataType == "timestamp" {
			year = 1971 + r.Intn(66)
		}
		if key {
			year = 2000 + r.Intn(3)
		}
		if r.Intn(12) == 0 {
			return "'0000-00-00 00:00:00'"
		}
		return fmt.Sprintf("'%04d-%02d-%02d %02d:%02d:%02d%s'", year, 1+r.Intn(12), 1+r.Intn(28), r.Intn(24), r.Intn(60), r.Intn(60), frac(r, ct))
	case "time":
		h := r.Intn(839)
		sign := ""
		if r.Intn(3) == 0 {
			sign = "-"
		}
		if r.Intn(10) == 0 {
			return pick(r, []string{"'838:59:59'", "'-838:59:59'", "'00:00:00'"})
		}
		return fmt.Sprintf("'%s%d:%02d:%02d%s'", sign, h, r.Intn(60), r.Intn(60), frac(r, ct))
	case "year":
		return pick(r, []string{"0", "1901", "2155", strconv.Itoa(1901 + r.Intn(255))})
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		if strings.HasSuffix(c.Name, "_j") {
			return jsonValue(r)
		}
		if c.Charset == "binary" || c.Charset == "" {
			return g.bytesValue(c, key)
		}
		return quote(g.text(c, key))
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return g.bytesValue(c, key)
	case "enum", "set":
		var vals []string
		for _, m := range reQuoted.FindAllStringSubmatch(c.ColumnType, -1) {
			vals = append(vals, strings.ReplaceAll(m[1], "''", "'"))
		}
		if c.DataType == "enum" {
			return quote(pick(r, vals))
		}
		var sel []string
		for _, v := range vals {
			if r.Intn(2) == 0 {
				sel = append(sel, v)
			}
		}
		return quote(strings.Join(sel, ","))
	case "uuid":
		return quote(pick(r, []string{
			"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
			"123e4567-e89b-12d3-a456-426614174001", "ffffffff-ffff-ffff-ffff-ffffffffffff",
			fmt.Sprintf("%08x-0000-1000-8000-%012x", r.Uint32(), r.Int63()&0xffffffffffff),
			"123e4567-e89b-12d3-a456-420000000000",
		}))
	case "inet4":
		return quote(pick(r, []string{"0.0.0.0", "10.0.0.0", "255.255.255.255", "192.168.1.0",
			fmt.Sprintf("%d.%d.%d.%d", r.Intn(256), r.Intn(256), r.Intn(256), r.Intn(256))}))
	case "inet6":
		return quote(pick(r, []string{"::", "::1", "fe80::", "2001:db8::", "ffff::ffff", "::ffff:1.2.3.0",
			fmt.Sprintf("2001:db8::%x:%x", r.Intn(65536), r.Intn(65536))}))
	case "point":
		return fmt.Sprintf("ST_PointFromText('POINT(%d %d)')", r.Intn(100)-50, r.Intn(100))
	case "geometry", "linestring":
		if c.DataType == "geometry" && r.Intn(2) == 0 {
			return "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))')"
		}
		return fmt.Sprintf("ST_GeomFromText('LINESTRING(%d %d,%d %d)')", r.Intn(9), r.Intn(9), 10+r.Intn(9), r.Intn(9))
	}
	return "DEFAULT"
}

func frac(r *rand.Rand, ct string) string {
	n, _ := typeLen(ct)
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('.')
	for i := 0; i < n; i++ {
		b.WriteByte(byte('0' + r.Intn(10)))
	}
	return b.String()
}

// text draws a value that fits c's length in characters.
func (g gen) text(c Col, key bool) string {
	r := g.r
	pool := utf8Variants
	if c.Charset == "latin1" {
		pool = latin1Variant
	}
	switch {
	case g.keyless && g.f.NoKeylessCase:
		pool = plainWords
	case key && g.f.NoKeyVariants:
		pool = asciiVariants
	}
	var s string
	switch n := r.Intn(10); {
	case n < 6 || key || (g.keyless && g.f.NoKeylessCase):
		s = pick(r, pool)
		if !key && r.Intn(3) == 0 {
			s += pick(r, pool)
		}
	case n < 8:
		s = pick(r, edgeTexts)
	default:
		var b strings.Builder
		for i := 0; i < 1+r.Intn(30); i++ {
			b.WriteByte(byte('a' + r.Intn(26)))
		}
		s = b.String()
	}
	max, _ := typeLen(c.ColumnType)
	if max > 0 {
		if rs := []rune(s); len(rs) > max {
			s = string(rs[:max])
		}
	}
	return s
}

func (g gen) bytesValue(c Col, key bool) string {
	r := g.r
	max, _ := typeLen(c.ColumnType)
	if max <= 0 {
		max = 64
	}
	n := r.Intn(max + 1)
	if key {
		n = r.Intn(min(max, 2) + 1)
	}
	var b strings.Builder
	b.WriteString("X'")
	for i := 0; i < n; i++ {
		v := r.Intn(256)
		if key {
			v = pick(r, []int{0, 0, 1, 'a', 'A', ' '})
		} else if r.Intn(3) == 0 {
			v = pick(r, []int{0, 0x20, 0xff})
		}
		fmt.Fprintf(&b, "%02X", v)
	}
	return b.String() + "'"
}

func jsonValue(r *rand.Rand) string {
	return quote(pick(r, []string{
		`{}`, `[]`, `null`, `{"a": 1, "b": [1, 2.5, "x"]}`, `"str"`, `{"k": {"nested": true}}`,
		fmt.Sprintf(`{"n": %d, "s": "é\u0000"}`, r.Intn(1000)), `[1, -0.0, 1e300]`,
	}))
}
