package dbconn

import "testing"

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		f    Flavor
		want string
	}{
		{"10.11.6-MariaDB-0+deb12u1", MariaDB, "10.11.6"},
		{"10.11.6-MariaDB-log", MariaDB, "10.11.6"},
		{"8.0.11-TiDB-v8.4.0", TiDB, "v8.4.0"},
		{"8.0.11-TiDB-v8.4.0-alpha-69-ge4e814f", TiDB, "v8.4.0"},
		{"8.0.36", MySQL, "8.0.36"},
	} {
		f, v := ParseVersion(c.in)
		if f != c.f || v != c.want {
			t.Errorf("ParseVersion(%q) = %v %q, want %v %q", c.in, f, v, c.f, c.want)
		}
	}
}
