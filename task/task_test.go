package task

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

const good = `
name: demo
source: {host: 127.0.0.1, port: 3307, user: root, password: "${SLUICE_TEST_PW}"}
target: {host: 127.0.0.1, port: 3308, user: root}
tables: {include: ["sbtest.*", "app.user?"], exclude: ["sbtest.tmp_*"]}
routes:
  - {schema: app, table: "user*", target-schema: app2, target-table: users}
  - {schema: "shard_*", target-schema: merged}
threads: 8
pool-size: 16
`

func TestParseGood(t *testing.T) {
	t.Setenv("SLUICE_TEST_PW", "s3cret")
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Source.Password != "s3cret" || c.Threads != 8 || c.PoolSize != 16 || c.RowsPerChunk != Default().RowsPerChunk {
		t.Fatalf("got %+v", c)
	}
	cases := []struct {
		ref  sluice.TableRef
		want bool
	}{
		{sluice.TableRef{Schema: "sbtest", Name: "sbtest1"}, true},
		{sluice.TableRef{Schema: "sbtest", Name: "tmp_x"}, false},
		{sluice.TableRef{Schema: "app", Name: "user1"}, true},
		{sluice.TableRef{Schema: "app", Name: "user12"}, false},
		{sluice.TableRef{Schema: "mysql", Name: "user"}, false},
	}
	for _, tc := range cases {
		if got := c.Selected(tc.ref); got != tc.want {
			t.Errorf("Selected(%v) = %v", tc.ref, got)
		}
	}
	if got := c.Route(sluice.TableRef{Schema: "app", Name: "user1"}); got.String() != "app2.users" {
		t.Errorf("route = %v", got)
	}
	if got := c.Route(sluice.TableRef{Schema: "shard_3", Name: "t"}); got.String() != "merged.t" {
		t.Errorf("route = %v", got)
	}
	if got := c.Route(sluice.TableRef{Schema: "sbtest", Name: "t"}); got.String() != "sbtest.t" {
		t.Errorf("route = %v", got)
	}
	if c.RouteSchema("shard_1") != "merged" || c.RouteSchema("app") != "app" {
		t.Error("RouteSchema")
	}
	if strings.Contains(c.Source.String(), "s3cret") {
		t.Error("password in String()")
	}
}

func TestParseBad(t *testing.T) {
	for name, doc := range map[string]string{
		"malformed":     "source: {host: [",
		"unknown key":   "sorce: {host: x}\ntables: {include: [\"a.*\"]}",
		"no tables":     "name: x",
		"no name":       "tables: {include: [\"a.*\"]}",
		"bad pattern":   "name: x\ntables: {include: [\"nodot\"]}",
		"bad threads":   "name: x\ntables: {include: [\"a.*\"]}\nthreads: 0",
		"many workers":  "name: x\ntables: {include: [\"a.*\"]}\nincremental: {worker-count: 253}",
		"bad port":      "name: x\ntables: {include: [\"a.*\"]}\nsource: {port: 99999}",
		"wrong type":    "name: x\ntables: {include: [\"a.*\"]}\nthreads: lots",
		"route no dest": "name: x\ntables: {include: [\"a.*\"]}\nroutes: [{schema: a}]",
		"unset var":     "name: x\ntables: {include: [\"a.*\"]}\nsource: {password: \"${SLUICE_TEST_SURELY_UNSET}\"}",
	} {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		var se *sluice.Error
		if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || se.Hint == "" || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: want one-line config error with hint, got %v", name, err)
		}
	}
}

func TestLoadRelativeDir(t *testing.T) {
	d := t.TempDir()
	p := d + "/t.yaml"
	if err := os.WriteFile(p, []byte("name: n\ntables: {include: [\"a.*\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != d+"/sluice-n" {
		t.Fatalf("dir = %s", c.Dir)
	}
	if _, err := Load(d + "/missing.yaml"); err == nil {
		t.Fatal("want error")
	}
}

// TestRequiredSections: a task file never falls back to a default server
// or task name, and an unset ${VAR} is an error naming it, not an empty
// password (issue 16).
func TestRequiredSections(t *testing.T) {
	_, err := Parse([]byte("tables: {include: [\"a.*\"]}"))
	if err == nil || !strings.Contains(err.Error(), "name: is missing") {
		t.Errorf("no name: %v", err)
	}
	_, err = Parse([]byte("name: x\ntables: {include: [\"a.*\"]}\ntarget: {password: \"a${SLUICE_TEST_SURELY_UNSET}\"}"))
	if err == nil || !strings.Contains(err.Error(), "target.password: ${SLUICE_TEST_SURELY_UNSET} is not set") || !strings.Contains(err.Error(), "export SLUICE_TEST_SURELY_UNSET") {
		t.Errorf("unset variable: %v", err)
	}
	t.Setenv("SLUICE_TEST_EMPTY", "")
	c, err := Parse([]byte("name: x\ntables: {include: [\"a.*\"]}\nsource: {password: \"${SLUICE_TEST_EMPTY}\"}"))
	if err != nil || c.Source.Password != "" {
		t.Fatalf("a variable set to empty: %v", err)
	}
	if err := c.Require("source"); err != nil {
		t.Errorf("source is set: %v", err)
	}
	err = c.Require("source", "target")
	var se *sluice.Error
	if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), "target: is missing") || se.Hint == "" {
		t.Errorf("no target: %v", err)
	}
	if err := Default().Require("source", "target"); err != nil {
		t.Errorf("a Config built in code: %v", err)
	}
}

// TestServeSection: serve: needs a server id and users with passwords
// (${VAR} works); without a target, tables: is optional.
// TestParseBytes: sizes with and without units; nonsense is refused.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "1K": 1024, "500M": 500 << 20, "10G": 10 << 30, "10GiB": 10 << 30, "2 TB": 2 << 40, "3kb": 3 << 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "1.5G", "10X", "99999999999T"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}

func TestServeSection(t *testing.T) {
	t.Setenv("SERVE_PW_TEST", "pw1")
	c, err := Parse([]byte("name: x\nsource: {host: h, port: 3306, user: u}\nserve: {server-id: 7, users: [{user: r, password: \"${SERVE_PW_TEST}\"}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Serve.Listen != "127.0.0.1:3310" || c.Serve.Users[0].Password != "pw1" || len(c.Tables.Include) != 1 || c.Tables.Include[0] != "*.*" {
		t.Fatalf("%+v %+v", c.Serve, c.Tables)
	}
	for body, want := range map[string]string{
		"serve: {users: [{user: r, password: p}]}":                                       "serve.server-id",
		"serve: {server-id: 7}":                                                          "serve.users",
		"serve: {server-id: 7, users: [{user: r}]}":                                      "needs a user and a password",
		"serve: {server-id: 7, users: [{user: r, password: \"${SURELY_UNSET_SERVE}\"}]}": "SURELY_UNSET_SERVE",
		"serve: {server-id: 7, users: [{user: r, password: p}], retain: {size: 10X}}":    "serve.retain.size",
		"serve: {server-id: 7, users: [{user: r, password: p}], retain: {age: soon}}":    "serve.retain.age",
	} {
		_, err := Parse([]byte("name: x\nsource: {host: h, port: 3306, user: u}\n" + body + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestKafkaSinkTLS: sink.kafka.tls parses, and a mode that could fall
// back to plaintext (preferred) or is unknown is refused with the fix.
func TestKafkaSinkTLS(t *testing.T) {
	head := "name: x\nsource: {host: h, port: 3306, user: u}\ntables: {include: [\"a.*\"]}\nsink: {kafka: {brokers: [\"k:9093\"], topic-prefix: p, "
	c, err := Parse([]byte(head + "tls: {ca: /etc/ca.pem}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tl := c.Sink.Kafka.TLS; tl == nil || tl.CA != "/etc/ca.pem" || tl.Mode != "" {
		t.Fatalf("sink.kafka.tls: %+v", c.Sink.Kafka.TLS)
	}
	for _, mode := range []string{"preferred", "on"} {
		_, err := Parse([]byte(head + "tls: {mode: " + mode + "}}}\n"))
		var se *sluice.Error
		if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "sink.kafka.tls.mode") || !strings.Contains(err.Error(), "verify-identity") || se.Hint == "" {
			t.Errorf("tls mode %s: %v, want a config error naming sink.kafka.tls.mode", mode, err)
		}
	}
}
