package sandboxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildSluice builds the sluice CLI into the test's temporary directory
// and returns its path. It is built without -race: it is the system under
// test, run as a separate process (killed, restarted, its memory
// measured), not the test.
func BuildSluice(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build sluice: %v: %s", err, out)
	}
	return bin
}
