package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSameTaskOtherDirRefusedBeforeDump: a second process running a task
// of the same name from another dir opened a binlog dump with the running
// task's server-id before its fence refused it, which cut the running
// task's dump off (6 reconnects). It is refused before any dump, and the
// running task never loses its connection.
func TestSameTaskOtherDirRefusedBeforeDump(t *testing.T) {
	src := sandboxtest.Start(t, "tsrc")
	dst := sandboxtest.Start(t, "tdst")
	sdb := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, sdb, "CREATE DATABASE vsrc", "CREATE TABLE vsrc.t (id INT PRIMARY KEY)", "INSERT INTO vsrc.t VALUES (1)")
	body := func(dir string) string {
		return strings.Replace(verifyTaskYAML(src.Endpoint(), dst.Endpoint(), "vsrc.*", "dir: "+dir+"\n"), "name: vt", "name: twin", 1)
	}
	a := startMigrateAll(verifyTask(t, body(t.TempDir())))
	defer a.stop()
	if !a.waitOutput("replicate twin: source") {
		t.Fatalf("first task stopped: %v\n%s", a.err, a.out.String())
	}
	_, _, err := runCLI(t, "migrate", "--config", verifyTask(t, body(t.TempDir())), "--mode", "incremental")
	if err == nil || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "another sluice process runs this task") {
		t.Fatalf("second process with the same task name: %v", err)
	}
	sandboxtest.MustExec(t, sdb, "INSERT INTO vsrc.t VALUES (2)")
	if !a.covered(t, sandboxtest.MustOpen(t, dst, ""), "twin", binlogPos(t, sdb)) {
		t.Fatalf("first task stopped: %v\n%s", a.err, a.out.String())
	}
	if strings.Contains(a.out.String(), "connection to the source lost") {
		t.Fatalf("the second process cut the first one's binlog dump:\n%s", a.out.String())
	}
}
