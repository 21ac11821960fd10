package kafka

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-db/sluice"
)

// Debezium writes a column's DEFAULT into its field schema ("default"),
// converted to the field's Connect type (BinlogDefaultValueConverter, then
// the column's value converter). A JDBC sink creates or alters the target
// column with it: without it, the rows that existed before an
// ADD COLUMN ... DEFAULT 'def' got NULL through Debezium's JDBC sink
// (issue 30 F5).

// epochEquivalent is a zero date or datetime ('0000-00-00', a zero month
// or day), which Debezium reads as the epoch, or as no default for a
// nullable column.
var (
	epochEquivalentDate = regexp.MustCompile(`^(\d{4}-\d{2}-00|\d{4}-00-\d{2}|0000-\d{2}-\d{2})$`)
	epochEquivalentTS   = regexp.MustCompile(`^(\d{4}-\d{2}-00|\d{4}-00-\d{2}|0000-\d{2}-\d{2}) 00:00:00(\.\d{1,6})?$`)
	charsetIntroducer   = regexp.MustCompile(`^_[A-Za-z0-9]+'(.*)'$`)
	currentTimestamp    = regexp.MustCompile(`(?i)^(current_timestamp|now|localtime|localtimestamp)(\(\d*\))?$`)
)

// defaultJSON is a column's default as the JSON value of its field
// schema's "default", and false when Debezium writes none (no DEFAULT,
// DEFAULT NULL, a zero date of a nullable column, or an expression it does
// not evaluate).
func defaultJSON(c sluice.Column, cp *colPlan) (string, bool) {
	if c.Default == nil || c.Generated {
		return "", false
	}
	v := *c.Default
	switch cp.kind {
	case kNumber, kDecimal, kBool, kBits, kDate, kDatetime, kTimestamp, kTime, kYear:
		v = strings.TrimSpace(v)
	}
	if m := charsetIntroducer.FindStringSubmatch(v); m != nil {
		v = m[1]
	}
	switch cp.kind {
	case kString, kEnum, kSet:
		return jsonString(v), true
	case kBytes:
		return string(appendBase64(nil, []byte(v))), true
	case kNumber, kYear:
		switch strings.ToLower(v) {
		case "true":
			return "1", true
		case "false":
			return "0", true
		}
		if typ := intType(c); typ == "float" || typ == "double" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return "", false
			}
			if typ == "float" {
				return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32), true
			}
			return strconv.FormatFloat(f, 'g', -1, 64), true
		}
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			return v, true
		}
		if _, err := strconv.ParseUint(v, 10, 64); err == nil {
			return v, true
		}
		return "", false
	case kDecimal:
		scale, _ := decimalArgs(c.FullType)
		s, ok := decimalAtScale(v, scale)
		if !ok {
			return "", false
		}
		return string(cp.e.appendValue(nil, cp, s)), true
	case kBool:
		n, ok := bitLiteral(v)
		if !ok {
			return "", false
		}
		return strconv.FormatBool(n != 0), true
	case kBits:
		// The value's bytes as a row's value of the column is written
		// (little-endian); Debezium 2.7 gives BIT(5) DEFAULT b'101' "BQ==".
		n, ok := bitLiteral(v)
		if !ok {
			return "", false
		}
		return string(cp.e.appendValue(nil, cp, n)), true
	case kDate:
		if epochEquivalentDate.MatchString(v) || epochEquivalentTS.MatchString(v) || v == "0" {
			if c.Nullable {
				return "", false
			}
			v = "1970-01-01"
		}
		if len(v) > 10 {
			v = v[:10]
		}
		return string(cp.e.appendValue(nil, cp, v)), true
	case kDatetime, kTimestamp:
		if currentTimestamp.MatchString(v) || epochEquivalentTS.MatchString(v) || v == "0" ||
			(cp.kind == kTimestamp && v == "1970-01-01 00:00:00") {
			// Debezium's DDL parser reads CURRENT_TIMESTAMP as the epoch.
			if c.Nullable {
				return "", false
			}
			v = "1970-01-01 00:00:00"
		}
		if len(v) == 10 {
			v += " 00:00:00"
		}
		if _, err := parseDatetime(v); err != nil {
			return "", false
		}
		return string(cp.e.appendValue(nil, cp, v)), true
	case kTime:
		if i := strings.IndexByte(v, ' '); i >= 0 {
			v = v[i+1:] // a datetime literal: its time
		}
		us, ok := parseTimeMicros(v)
		if !ok {
			return "", false
		}
		return strconv.FormatInt(us, 10), true
	}
	return "", false // geometry: not written (docs/manual/kafka.md)
}

// bitLiteral reads a BIT default: b'101', 0b101 or a decimal number.
func bitLiteral(v string) (uint64, bool) {
	l := strings.ToLower(v)
	switch {
	case strings.HasPrefix(l, "b'") && strings.HasSuffix(l, "'"):
		n, err := strconv.ParseUint(l[2:len(l)-1], 2, 64)
		return n, err == nil
	case strings.HasPrefix(l, "0b"):
		n, err := strconv.ParseUint(l[2:], 2, 64)
		return n, err == nil
	case strings.HasPrefix(l, "0x"): // the schema tracker's text of b'101'
		n, err := strconv.ParseUint(l[2:], 16, 64)
		return n, err == nil
	}
	n, err := strconv.ParseUint(l, 10, 64)
	return n, err == nil
}

// decimalAtScale writes a decimal literal with exactly scale fractional
// digits, rounding half up as BigDecimal.setScale(scale, HALF_UP) does.
func decimalAtScale(v string, scale int) (string, bool) {
	r, ok := new(big.Rat).SetString(v)
	if !ok {
		return "", false
	}
	// Round half away from zero at scale digits.
	mul := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(mul))
	num, den := x.Num(), x.Denom()
	q, m := new(big.Int).QuoRem(new(big.Int).Abs(num), den, new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	s := q.String()
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if num.Sign() < 0 && q.Sign() != 0 {
		s = "-" + s
	}
	return s, true
}
