package task

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

const sourcesGood = `
name: global
sources:
  - {name: shard1, host: 127.0.0.1, port: 3307, user: repl, password: "${SLUICE_TEST_PW}", domain-id: 1}
  - {name: shard2, host: 127.0.0.1, port: 3308, user: repl, domain-id: 2, server-id: 77, gtid-set: "0-1-5"}
  - {name: shard3, host: 127.0.0.1, port: 3309, user: repl, domain-id: 0, binlog-file: mysql-bin.000002, binlog-pos: 4}
serve: {server-id: 9, users: [{user: r, password: p}], max-binlog-size: 1048576}
`

func TestParseSources(t *testing.T) {
	t.Setenv("SLUICE_TEST_PW", "pw1")
	c, err := Parse([]byte(sourcesGood))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 3 || c.Sources[0].Password != "pw1" || c.Sources[0].Port != 3307 || *c.Sources[0].DomainID != 1 ||
		*c.Sources[2].DomainID != 0 || c.Sources[1].ServerID != 77 || c.Sources[1].GTIDSet != "0-1-5" ||
		c.Sources[2].BinlogFile != "mysql-bin.000002" || c.Serve.MaxBinlogSize != 1<<20 {
		t.Fatalf("got %+v", c.Sources)
	}
	if len(c.Tables.Include) != 1 || c.Tables.Include[0] != "*.*" {
		t.Fatalf("a pure binlog server serves every table: %v", c.Tables.Include)
	}
}

// TestSourcesErrors: each mistake gets one line naming the field and the fix.
func TestSourcesErrors(t *testing.T) {
	t.Setenv("SLUICE_TEST_PW", "pw1")
	serve := "serve: {server-id: 9, users: [{user: r, password: p}]}\n"
	two := func(a, b string) string {
		return "name: g\nsources:\n  - {" + a + "}\n  - {" + b + "}\n" + serve
	}
	s1 := "name: a, host: h, port: 1, user: u, domain-id: 1"
	cases := []struct{ yaml, want string }{
		{two(s1, "name: a, host: h, port: 2, user: u, domain-id: 2"), `sources[1].name "a" is also sources[0]'s name`},
		{two(s1, "name: b, host: h, port: 2, user: u, domain-id: 1"), "sources[1].domain-id 1 is also sources[0]'s"},
		{two(s1, "name: b, host: h, port: 2, user: u"), "sources[1].domain-id is missing"},
		{two(s1, "name: b, port: 2, user: u, domain-id: 2"), "sources[1].host is empty"},
		{two(s1, "name: b, host: h, user: u, domain-id: 2"), "sources[1].port is 0"},
		{two(s1, "host: h, port: 2, user: u, domain-id: 2"), "sources[1].name must be a non-empty word"},
		{two(s1, "name: b, host: h, port: 2, user: u, domain-id: 2, password: \"${SLUICE_NOT_SET_X}\""), "sources[1].password: ${SLUICE_NOT_SET_X} is not set"},
		{two(s1, "name: b, host: h, port: 2, user: u, domain-id: 2, gtid-set: 0-1-1, binlog-file: f.1"), "has both gtid-set and binlog-file"},
		{"name: g\nsource: {host: h, port: 1, user: u}\nsources:\n  - {" + s1 + "}\n" + serve, "source and sources are both set"},
		{"name: g\ntarget: {host: h, port: 1, user: u}\nsources:\n  - {" + s1 + "}\n" + serve, "sources is set with a target"},
		{"name: g\nsources: []\n" + serve, "sources is empty"},
		{"name: g\nsources:\n  - {" + s1 + "}\nserve: {server-id: 9, users: [{user: r, password: p}], max-binlog-size: 10}\n", "serve.max-binlog-size is 10"},
		{two(s1, "name: b, host: h, port: 2, user: u, domain-id: 2, colour: red"), "field colour not found"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\nwant %q, got %v", tc.yaml, tc.want, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
		var se *sluice.Error
		if !errors.As(err, &se) || se.Hint == "" {
			t.Errorf("no hint: %v", err)
		}
	}
}
