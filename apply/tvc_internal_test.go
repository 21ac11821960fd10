package apply

import "testing"

func TestValuesOK(t *testing.T) {
	for v, want := range map[string]bool{
		"10.11.6-MariaDB-0+deb12u1-log": true,
		"10.3.3-MariaDB":                true,
		"10.2.44-MariaDB-log":           false,
		"11.4.2-MariaDB":                true,
		"5.5.5-10.6.12-MariaDB":         true,
		"8.0.36":                        false,
		"8.0.11-TiDB-v8.4.0":            false,
		"MariaDB":                       false,
	} {
		if got := valuesOK(v); got != want {
			t.Errorf("valuesOK(%q) = %v, want %v", v, got, want)
		}
	}
}
