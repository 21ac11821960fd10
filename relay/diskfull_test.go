package relay

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestDiskFullHasAFix: a write that fails with ENOSPC (or a quota) ends in
// one line that names the relay directory, the cause and the fix; other
// errors pass through unchanged.
func TestDiskFullHasAFix(t *testing.T) {
	w := &Writer{l: &Log{cfg: Config{Dir: "/data/task/relay"}}}
	full := fmt.Errorf("relay: flush mysql-bin.000002: %w", &os.PathError{Op: "write", Path: "/data/task/relay/mysql-bin.000002", Err: syscall.ENOSPC})
	err := w.diskError(full)
	var se *sluice.Error
	if !errors.Is(err, sluice.ErrDiskFull) || !errors.As(err, &se) || !strings.Contains(se.Hint, "relay-retain") ||
		!strings.Contains(err.Error(), "/data/task/relay") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("disk full: %v", err)
	}
	other := errors.New("relay: boom")
	if got := w.diskError(other); got != other {
		t.Fatalf("another error changed: %v", got)
	}
}
