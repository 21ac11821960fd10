package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestLoadLineMovesInAWholeTableLoad: a table loaded as one transaction
// (commit unit table, what auto picks for small tables) counted its rows
// only at its commit, so the load line read "0 rows 0%" with no ETA for
// the whole load (issue 30). The chunk delay holds the commit back; the
// plain progress lines printed meanwhile must show the streamed rows.
func TestLoadLineMovesInAWholeTableLoad(t *testing.T) {
	inst := sandboxtest.Start(t, "lprog")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE lpsrc", "CREATE TABLE lpsrc.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO lpsrc.t SELECT seq, seq FROM lpsrc.seq_1_to_1000")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "lpsrc", "vdst", "lpdst", "name: vt", "name: lprog").Replace(
		verifyTaskYAML(ep, ep, "lpsrc.*", "dir: "+t.TempDir()+"\n")))
	out, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full", "--commit-unit", "table",
		"--chunk-delay", "2s", "--progress-every", "100ms")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`load\s+(\d+) rows .*?(\d+)%`)
	moving := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "progress ") {
			continue
		}
		if m := line.FindStringSubmatch(l); m != nil && m[1] == "1000" && m[2] == "100" {
			moving++
		}
	}
	// The commit waits 2 s, so about 20 lines fall before it; without the
	// in-flight counts only the final line (and at most one printed between
	// the commit and the end) shows the rows.
	if moving < 5 {
		t.Fatalf("%d progress lines show the streamed 1000 rows at 100%%, want the lines printed while the commit waits:\n%s", moving, out)
	}
}
