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

func TestConfigValidate(t *testing.T) {
	good := Config{ServerID: 9, Users: []User{{Name: "repl", Password: "pw"}}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, c := range map[string]Config{
		"default":         DefaultConfig(),
		"no server id":    {Users: good.Users},
		"no users":        {ServerID: 9},
		"empty password":  {ServerID: 9, Users: []User{{Name: "repl"}}},
		"tls without key": {ServerID: 9, Users: good.Users, RequireTLS: true},
	} {
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
