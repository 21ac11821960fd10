package sandboxtest

import (
	"errors"
	"flag"
	"testing"
)

// `go test -short` (make test-unit) runs the tests that need no server:
// every helper here that starts a MariaDB, etcd, Kafka or redis-server, or
// builds the sluice binary (the tests that run it drive servers), skips
// the test under -short, and Run starts no shared sandbox. A package
// whose tests reach a shared sandbox without such a helper calls SkipShort
// first.

// ErrShort is what New and its kin return under -short, so that a
// TestMain that starts servers by hand fails loudly instead of starting
// them: it checks Short first.
var ErrShort = errors.New("sandboxtest: no servers under go test -short (make test-unit)")

// Short reports whether this is a test binary run with -short. Unlike
// testing.Short it is safe before flag.Parse (in TestMain) and outside a
// test binary (cmd/difftest and the benchmarks use this package's
// helpers), where it is false.
func Short() bool {
	if !testing.Testing() {
		return false
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// SkipShort skips tb under -short: it needs a server.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if Short() {
		tb.Skip("needs a server: skipped under -short (make test-unit)")
	}
}
