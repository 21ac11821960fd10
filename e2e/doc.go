// Package e2e has no code: its tests drive whole replication tasks from a
// real source to a real target (see e2e_test.go). Run them with
// go test ./e2e/ (they start their own MariaDB sandboxes; make test runs
// them, make test-unit skips them).
package e2e
