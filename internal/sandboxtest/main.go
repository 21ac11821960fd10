package sandboxtest

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-db/sluice/sandbox"
)

// Want names a sandbox for Run and where to store it.
type Want struct {
	Name string
	Inst **sandbox.Instance
}

// Run starts the wanted sandboxes, runs the package's tests and stops every
// sandbox it started, whatever happened. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(sandboxtest.Run(m, sandboxtest.Want{"src", &src})) }
//
// Under -short (make test-unit) it starts nothing: the tests that reach
// the sandboxes skip (SkipShort, or a helper such as MustOpen that calls it).
func Run(m *testing.M, wants ...Want) int {
	if Short() {
		return m.Run()
	}
	for _, w := range wants {
		inst, stop, err := New(w.Name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		*w.Inst = inst
	}
	return m.Run()
}
