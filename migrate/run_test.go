package migrate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/task"
)

// TestRunRefusesBeforeWork: a wrong mode, a bad metrics-addr, and a mode
// that replicates in a build without replication are refused before Run
// connects to anything (the task names no reachable server).
func TestRunRefusesBeforeWork(t *testing.T) {
	for _, c := range []struct {
		mode, metrics, want string
	}{
		{"fast", "", `--mode "fast"`},
		{"full", "127.0.0.1:http", "incremental.metrics-addr"},
		{"all", "", "not available in this build"},
		{"incremental", "", "not available in this build"},
	} {
		mc := DefaultConfig()
		mc.Task, mc.Mode = task.Default(), c.mode
		mc.Task.Incremental.MetricsAddr = c.metrics
		err := Run(context.Background(), mc)
		if !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mode %s, metrics-addr %q: %v, want a config error naming %s", c.mode, c.metrics, err, c.want)
		}
	}
}
