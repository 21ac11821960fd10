package dtx

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{"abc-1": "abc-1", "a;b\nc\rd": "abcd", ";": "", "": ""} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}
