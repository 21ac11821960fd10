package httpwire

import "testing"

func TestChecks(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "24": 24, "999999999": 999999999} {
		if n, ok := Digits([]byte(in)); !ok || n != want {
			t.Errorf("Digits(%q) = %d, %v", in, n, ok)
		}
	}
	for _, in := range []string{"", "-1", "+1", " 1", "1e3", "1000000000"} {
		if _, ok := Digits([]byte(in)); ok {
			t.Errorf("Digits(%q) accepted", in)
		}
	}
	for in, want := range map[string]bool{"Content-Length": true, "x_y.z~!": true, "": false, "a b": false, "a:b": false, "a\x7f": false, "(a)": false} {
		if Token([]byte(in)) != want {
			t.Errorf("Token(%q) = %v", in, !want)
		}
	}
	for in, want := range map[string]bool{"text/plain; q=1": true, "a\tb": true, "": true, "a\rb": false, "a\x00": false, "\x7f": false} {
		if FieldValue([]byte(in)) != want {
			t.Errorf("FieldValue(%q) = %v", in, !want)
		}
	}
}
