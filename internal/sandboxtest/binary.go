package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BinEnv names a prebuilt sluice binary for the tests. `make test` builds
// sluice once (without -race) and sets it, so the packages of one run share
// one build instead of each building its own; without it (go test on one
// package) each caller builds into a temporary directory.
const BinEnv = "SLUICE_TEST_BIN"

// BuildSluice returns the sluice CLI for a test: $SLUICE_TEST_BIN, or a
// build into the test's temporary directory. It is built without -race: it
// is the system under test, run as a separate process (killed, restarted,
// its memory measured), not the test.
func BuildSluice(tb testing.TB) string {
	tb.Helper()
	SkipShort(tb)
	bin, err := SluiceBinary(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// SluiceBinary is BuildSluice for a TestMain: $SLUICE_TEST_BIN, or a build
// into dir.
func SluiceBinary(dir string) (string, error) {
	if Short() {
		return "", ErrShort
	}
	if bin := os.Getenv(BinEnv); bin != "" {
		if st, err := os.Stat(bin); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s=%s: not a sluice binary (%v)", BinEnv, bin, err)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build sluice: %v: %s", err, out)
	}
	return bin, nil
}
