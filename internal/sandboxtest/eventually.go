package sandboxtest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test when bound
// passes first, naming what it waited for and, when given, diag()'s
// account of the state (a status, a log tail). The bound is a guard
// against a hang, not a timing assertion: keep it generous, since the
// machine is shared and its speed varies tenfold. cond may itself fail the
// test (a process that exited, a replica that stopped) to end the wait
// early with the real cause.
func Eventually(tb testing.TB, bound time.Duration, what string, cond func() bool, diag ...func() string) {
	tb.Helper()
	poll := 10 * time.Millisecond
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			for _, d := range diag {
				msg += "\n" + d()
			}
			tb.Fatalf("%s: not within %s%s", what, bound, msg)
		}
		time.Sleep(poll)
		if poll < 100*time.Millisecond {
			poll += poll / 2
		}
	}
}
