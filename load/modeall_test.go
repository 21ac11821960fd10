package load_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestModeAllRefusesMixedSnapshots kills --mode all during its full copy
// and runs it again. The rerun finishes the copy from a new snapshot, so the
// target holds rows of two snapshots; replicating from the first one would
// apply changes twice (a doubled row in the keyless table). It must refuse
// with a fix instead of starting the replication.
func TestModeAllRefusesMixedSnapshots(t *testing.T) {
	createResumeData(t, "rs_all")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "rs_all"
	cfg := taskFile(t, task, "rs_all.*", "threads: 2\npool-size: 2\nrows-per-chunk: 500")
	killMidway(t, dst, task, 4, "migrate", "--config", cfg, "--mode", "all", "--commit-unit", "chunk", "--chunk-delay", "150ms")
	before, _ := checkpointsMatchData(t, dst, task, "rs_all", "big", "comp", "nokey")
	// Were the guard missing, the rerun would replicate until stopped; the
	// deadline only keeps such a regression from hanging the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, "migrate", "--config", cfg, "--mode", "all", "--commit-unit", "chunk")
	var outb, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &errb
	_ = cmd.Run()
	out, errs, code := outb.String(), errb.String(), cmd.ProcessState.ExitCode()
	if code != 2 || !strings.Contains(errs, "second snapshot") || !strings.Contains(errs, "fix:") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("want exit 2 with one line naming the second snapshot and a fix; got %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if strings.Contains(out, "replicate "+task) {
		t.Fatalf("replication started after a mixed-snapshot copy:\n%s", out)
	}
	after, _ := checkpointsMatchData(t, dst, task, "rs_all", "big", "comp", "nokey")
	if after <= before {
		t.Fatalf("the rerun should have finished the copy first: %d chunks before, %d after", before, after)
	}
}
