package httpapi

import "unsafe"

// jsonScanner reads the subset of JSON that dtm's clients send (ASCII
// strings with simple escapes, plain integers, booleans, objects of
// strings); every method reports false on anything outside it, and the
// caller then decodes with encoding/json. It costs a fraction of
// encoding/json's reflection. It is wire code, so it lives with the HTTP
// API, not with the state machine (issue 31).
type jsonScanner struct {
	b []byte
	i int
}

func (d *jsonScanner) skipSpace() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Consume skips white space and then c, if c is next.
func (d *jsonScanner) Consume(c byte) bool {
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// End reports whether only white space is left.
func (d *jsonScanner) End() bool {
	d.skipSpace()
	return d.i == len(d.b)
}

// RawKey reads `"key":` for a key without escapes.
func (d *jsonScanner) RawKey() ([]byte, bool) {
	if !d.Consume('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			k := d.b[start:d.i]
			d.i++
			return k, d.Consume(':')
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// Str reads an ASCII string, with the escapes JSON has except \u.
func (d *jsonScanner) Str() (string, bool) {
	if !d.Consume('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := known(d.b[start:d.i])
			d.i++
			return s, true
		case c == '\\':
			return d.escapedStr(start)
		case c < 0x20 || c >= 0x80:
			return "", false
		}
		d.i++
	}
	return "", false
}

// known returns the strings every request repeats (step keys, types, the
// protocol) without allocating, and a copy of anything else.
func known(b []byte) string {
	switch string(b) { // no allocation: the compiler compares the bytes
	case "action":
		return "action"
	case "compensate":
		return "compensate"
	case "saga":
		return "saga"
	case "msg":
		return "msg"
	case "tcc":
		return "tcc"
	case "xa":
		return "xa"
	case "http":
		return "http"
	}
	return string(b)
}

// escapedStr finishes a string that has escapes from start (after the quote).
func (d *jsonScanner) escapedStr(start int) (string, bool) {
	out := make([]byte, 0, d.i-start+32)
	out = append(out, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			// out is this string's own copy, never written again: no second copy.
			return unsafe.String(unsafe.SliceData(out), len(out)), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			switch e := d.b[d.i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			default: // \u (surrogates, invalid code points) and errors: encoding/json
				return "", false
			}
			d.i += 2
			continue
		case c < 0x20 || c >= 0x80:
			return "", false
		}
		out = append(out, c)
		d.i++
	}
	return "", false
}

// Bool reads true or false.
func (d *jsonScanner) Bool() (bool, bool) {
	d.skipSpace()
	rest := d.b[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		return true, d.delimited()
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		return false, d.delimited()
	}
	return false, false
}

// Int reads an integer without fraction or exponent, of at most 18 digits
// (so that it cannot overflow an int64; longer ones go to encoding/json).
func (d *jsonScanner) Int() (int64, bool) {
	d.skipSpace()
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	digits := d.i
	var n int64
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		n = n*10 + int64(d.b[d.i]-'0')
		d.i++
	}
	if d.i == digits || d.i-digits > 18 || d.b[digits] == '0' && d.i-digits > 1 || !d.delimited() {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// delimited reports whether a literal ends here (and not in "truex" or "1.5").
func (d *jsonScanner) delimited() bool {
	if d.i == len(d.b) {
		return true
	}
	switch d.b[d.i] {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// Object reads an object of strings (an empty one too).
func (d *jsonScanner) Object() (map[string]string, bool) {
	if !d.Consume('{') {
		return nil, false
	}
	m := make(map[string]string, 2)
	if d.Consume('}') {
		return m, true
	}
	for {
		d.skipSpace()
		k, ok := d.Str()
		if !ok || !d.Consume(':') {
			return nil, false
		}
		v, ok := d.Str()
		if !ok {
			return nil, false
		}
		m[k] = v
		if d.Consume('}') {
			return m, true
		}
		if !d.Consume(',') {
			return nil, false
		}
	}
}

// newJSONScanner returns a scanner at the start of b.
func newJSONScanner(b []byte) jsonScanner { return jsonScanner{b: b} }
