package serve

import "testing"

func TestPrintableEscapesControlBytes(t *testing.T) {
	for in, want := range map[string]string{
		"mysql-bin.000001":   "mysql-bin.000001",
		"a\x00\x00b":         `a\x00\x00b`,
		"caf\u00e9 \x1b[31m": "caf\u00e9 \\x1b[31m",
		"bad \xff utf8":      `bad \xff utf8`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
