// Package httpwire holds the small checks that sluice's hand-written
// HTTP/1.1 readers share (the coordinator's lean server loop and its
// branch client): each reader takes only the plain shape it knows and
// leaves anything else to net/http, and these checks decide "plain".
package httpwire

import "strings"

// Digits parses a Content-Length or a status code: decimal digits only,
// no sign, at most 9.
func Digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Token reports whether b is a header name (an HTTP token).
func Token(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return len(b) > 0
}

// FieldValue reports whether a header value has no control bytes but tab.
func FieldValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
