package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCheckTargetTriggers (issue 29, N12): sluice check names the triggers
// on the target tables, and migrate refuses to start while they are there;
// a trigger on the source is no matter (its writes arrive as rows).
func TestCheckTargetTriggers(t *testing.T) {
	inst := sandboxtest.Start(t, "trgchk")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE tsrc", "CREATE TABLE tsrc.t (id INT PRIMARY KEY, v INT)", "CREATE TABLE tsrc.log (id INT PRIMARY KEY)",
		"CREATE TRIGGER tsrc.t_src AFTER INSERT ON tsrc.t FOR EACH ROW INSERT INTO tsrc.log VALUES (NEW.id)",
		"CREATE DATABASE tdst", "CREATE TABLE tdst.t (id INT PRIMARY KEY, v INT)",
		"CREATE TRIGGER tdst.t_bi BEFORE INSERT ON tdst.t FOR EACH ROW SET NEW.v = NEW.v + 1")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "tsrc", "vdst", "tdst", "name: vt", "name: trgchk").Replace(
		verifyTaskYAML(ep, ep, "tsrc.*", "dir: "+t.TempDir()+"\n")))
	out, _, err := runCLI(t, "check", "--config", cfg)
	// The source's trigger is named only by "objects not copied", never as
	// a target trigger.
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "target triggers") {
			line = l
		}
	}
	if !errors.Is(err, ErrChecksFailed) || !strings.HasPrefix(line, "fail  target triggers") || !strings.Contains(line, "tdst.t_bi (BEFORE INSERT)") ||
		!strings.Contains(line, "drop these triggers on the target") || strings.Contains(line, "t_src") {
		t.Fatalf("check with a trigger on a target table: %v\n%s", err, out)
	}
	for _, mode := range []string{"full", "all"} {
		_, _, err = runCLI(t, "migrate", "--config", cfg, "--mode", mode)
		if !errors.Is(err, ErrChecksFailed) || !strings.Contains(err.Error(), "tdst.t_bi") || !strings.Contains(err.Error(), "(fix: drop these triggers") {
			t.Fatalf("migrate --mode %s with a trigger on a target table: %v", mode, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM tdst.t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused runs wrote %d rows (%v)", n, err)
	}
	sandboxtest.MustExec(t, db, "DROP TRIGGER tdst.t_bi")
	if out, _, err = runCLI(t, "check", "--config", cfg); !strings.Contains(out, "pass  target triggers") {
		t.Fatalf("check without the trigger: %v\n%s", err, out)
	}
}
