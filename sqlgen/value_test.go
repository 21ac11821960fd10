package sqlgen

import (
	"math"
	"testing"
	"time"
)

// decimalLike stands for decimal.Decimal: an exact type that prints its value.
type decimalLike string

func (d decimalLike) String() string { return string(d) }

func TestAppendValue(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		// NULL is the nil interface only.
		{nil, "NULL"},
		{int(-1), "-1"},
		{int8(-5), "-5"},
		{int16(-32768), "-32768"},
		{int32(2147483647), "2147483647"},
		{int64(math.MinInt64), "-9223372036854775808"},
		{uint(7), "7"},
		{uint8(255), "255"},
		{uint16(65535), "65535"},
		{uint32(4294967295), "4294967295"},
		{uint64(18446744073709551615), "18446744073709551615"},
		{true, "1"},
		{false, "0"},
		// The shortest text that reads back as the same float of its width.
		{float32(1.1), "1.1"},
		{float64(0.1), "0.1"},
		{float64(0), "0"},
		{math.Copysign(0, -1), "-0"},
		{1e300, "1e+300"},
		{float32(3.4028235e38), "3.4028235e+38"},
		// No MySQL literal is NaN or infinite.
		{math.NaN(), "NULL"},
		{math.Inf(1), "NULL"},
		{float32(math.Inf(-1)), "NULL"},
		{"", "''"},
		{"it's", `'it\'s'`},
		{"a\\b\n\r\x00\x1a\"", `'a\\b\n\r\0\Z\"'`},
		{"ü日本", "'ü日本'"},
		{[]byte{0xff, '\''}, "_binary'\xff\\''"},
		{[]byte{}, "_binary''"},
		// A nil []byte is an empty value, not NULL (the decoder gives NULL
		// as the nil interface).
		{[]byte(nil), "_binary''"},
		{time.Date(2024, 1, 2, 3, 4, 5, 600000000, time.UTC), "'2024-01-02 03:04:05.6'"},
		{time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), "'2024-01-02 03:04:05'"},
		{time.Date(1, 1, 1, 0, 0, 0, 123456789, time.UTC), "'0001-01-01 00:00:00.123456'"},
		{decimalLike("-12345678901234567890.000000001"), "'-12345678901234567890.000000001'"},
		{struct{ A int }{3}, "'{3}'"},
	}
	for _, c := range cases {
		if got := string(AppendValue(nil, c.in)); got != c.want {
			t.Errorf("AppendValue(%#v) = %s, want %s", c.in, got, c.want)
		}
	}
	// It appends: what b holds stays.
	if got := string(AppendValue([]byte("x="), int32(1))); got != "x=1" {
		t.Errorf("AppendValue onto a buffer = %s", got)
	}
}

func TestAppendQuoted(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "''"},
		{"plain", "'plain'"},
		{"'", `'\''`},
		{`"`, `'\"'`},
		{`\`, `'\\'`},
		{"\x00\n\r\x1a", `'\0\n\r\Z'`},
		// Other control bytes and UTF-8 pass unchanged.
		{"\t\b", "'\t\b'"},
		{"ключ 日本 ✓", "'ключ 日本 ✓'"},
		// Invalid UTF-8 is kept byte for byte.
		{"\xff\xfe", "'\xff\xfe'"},
		{"`x`", "'`x`'"},
	}
	for _, c := range cases {
		if got := string(AppendQuoted(nil, c.in)); got != c.want {
			t.Errorf("AppendQuoted(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAppendIdent(t *testing.T) {
	cases := []struct{ in, want string }{
		{"t", "`t`"},
		{"", "``"},
		{"a`b", "`a``b`"},
		{"``", "``````"},
		{"s.t", "`s.t`"},
		{"ü日本", "`ü日本`"},
		{"it's", "`it's`"},
		{"sp ace", "`sp ace`"},
	}
	for _, c := range cases {
		if got := string(AppendIdent(nil, c.in)); got != c.want {
			t.Errorf("AppendIdent(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := string(AppendIdent([]byte("`s`."), "t")); got != "`s`.`t`" {
		t.Errorf("AppendIdent onto a buffer = %s", got)
	}
}

func TestEqualValue(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		a, b any
		want bool
	}{
		{"both NULL", nil, nil, true},
		{"NULL and zero", nil, int64(0), false},
		{"zero and NULL", int64(0), nil, false},
		{"NULL and empty bytes", nil, []byte{}, false},
		{"empty bytes and NULL", []byte{}, nil, false},
		{"same int", int64(1), int64(1), true},
		{"other int", int64(1), int64(2), false},
		// Same number, other Go type: counted as a change (an UPDATE that
		// sets the same value is harmless; a missed change is not).
		{"int widths", int32(1), int64(1), false},
		{"same string", "a", "a", true},
		// Any difference is a change, even one a collation ignores.
		{"case", "a", "A", false},
		{"trailing space", "a", "a ", false},
		{"same bytes", []byte("a\x00"), []byte("a\x00"), true},
		{"other bytes", []byte("a"), []byte("b"), false},
		{"nil and empty bytes", []byte(nil), []byte{}, true},
		{"bytes and string", []byte("a"), "a", false},
		{"string and bytes", "a", []byte("a"), false},
		{"same float", 1.5, 1.5, true},
		{"NaN", math.NaN(), math.NaN(), false},
		{"same time", ts, ts, true},
		{"other time", ts, ts.Add(time.Microsecond), false},
		// Values Go cannot compare count as changed, never panic.
		{"incomparable", []int{1}, []int{1}, false},
		{"incomparable maps", map[string]int{}, map[string]int{}, false},
	}
	for _, c := range cases {
		if got := EqualValue(c.a, c.b); got != c.want {
			t.Errorf("%s: EqualValue(%#v, %#v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}
