package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBadInputsEndInOneLineWithAFix: bad inputs end in one line of the
// form "sluice: <what>: <why> (fix: <how>)", as main prints them: one
// (fix: ...), never two, and no password (issue 16's list: a doubled
// fix, a non-MySQL server, the dtx store's fix, unset variables, missing
// sections, and more). The ones that need a server are tested where the
// server is (dbconn, load, binlog); these need none.
func TestBadInputsEndInOneLineWithAFix(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a service that is not MySQL: it sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	good := "name: x\ntables: {include: [\"a.*\"]}\nsource: {host: 127.0.0.1, port: %d, user: u, password: pw-secret}\ntarget: {host: 127.0.0.1, port: %d, user: u, password: pw-secret}\n"
	notMySQL := write("notmysql.yaml", strings.ReplaceAll(strings.ReplaceAll(good, "%d", itoa(port)), "port: "+itoa(port)+", user: u, password: pw-secret}\ntarget", "port: "+itoa(port)+", user: u, password: pw-secret}\ntarget"))
	cases := map[string][]string{
		"no --config":           {"migrate", "--mode", "full"},
		"missing task file":     {"migrate", "--config", filepath.Join(dir, "none.yaml"), "--mode", "full"},
		"unknown key":           {"migrate", "--config", write("typo.yaml", "name: x\ntablez: {}\n"), "--mode", "full"},
		"unset variable":        {"migrate", "--config", write("var.yaml", "name: x\ntables: {include: [\"a.*\"]}\ntarget: {password: \"${SLUICE_TEST_SURELY_UNSET}\"}\n"), "--mode", "full"},
		"no target":             {"migrate", "--config", write("notarget.yaml", "name: x\ntables: {include: [\"a.*\"]}\nsource: {host: 127.0.0.1}\n"), "--mode", "full"},
		"bad tls mode":          {"migrate", "--config", write("tls.yaml", "name: x\ntables: {include: [\"a.*\"]}\nsource: {tls: {mode: sometimes}}\ntarget: {}\n"), "--mode", "full"},
		"bad mode":              {"migrate", "--config", notMySQL, "--mode", "sideways"},
		"not a MySQL server":    {"check", "--config", notMySQL, "--mode", "full"},
		"dtx bad store":         {"dtx", "query", "g1", "--store", "mysql://u:pw-secret@127.0.0.1:notaport/d"},
		"dtx unreachable":       {"dtx", "query", "g1", "--server", "http://127.0.0.1:1"},
		"skip without gtid":     {"skip", "--config", notMySQL},
		"skip bad gtid":         {"skip", "--config", notMySQL, "--gtid", "zero"},
		"pause not running":     {"pause", "--config", notMySQL},
		"status never ran":      {"status", "--config", notMySQL},
		"verify no config":      {"verify"},
		"stop no config":        {"stop"},
		"replace without --sql": {"replace", "--config", notMySQL, "--gtid", "0-1-2"},
		"task subcommand typo":  {"task", "lsit"},
		"dtx subcommand typo":   {"dtx", "srve"},
		"check bad mode":        {"check", "--config", notMySQL, "--mode", "bogus"},
	}
	form := regexp.MustCompile(`^sluice: [^:]+: .+ \(fix: [^\n]+\)$`)
	for name, args := range cases {
		_, _, err := runCLI(t, args...)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		line := "sluice: " + strings.Join(strings.Fields(err.Error()), " ")
		if !form.MatchString(line) || strings.Count(line, "(fix: ") != 1 || strings.Contains(line, "pw-secret") {
			t.Errorf("%s: %q is not one line 'sluice: <what>: <why> (fix: <how>)' with one fix and no password", name, line)
		}
	}
}

// A negative --threads was taken for "the task's value" in silence, and the
// run went on with another value than the command line said (issue 30).
func TestNegativeFlagsRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(cfg, []byte("name: x\ntables: {include: [\"a.*\"]}\nsource: {host: 127.0.0.1, port: 1, user: u}\ntarget: {host: 127.0.0.1, port: 1, user: u}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fl := range []string{"--threads", "--pool-size", "--rows-per-chunk"} {
		_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full", fl, "-5")
		if err == nil || !strings.Contains(err.Error(), fl+" -5 is negative") {
			t.Errorf("%s -5: %v", fl, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
