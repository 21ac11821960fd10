// Package hugetxn holds the end-to-end tests of huge transactions through
// `sluice serve` (issue 14 item 6): a single transaction of hundreds of
// megabytes to gigabytes passes source -> relay -> (merge) -> serve -> a
// stock MariaDB replica while the sluice process's peak RSS stays under
// a budget. It has no code; see huge_test.go and
// docs/manual/huge-transactions.md.
package hugetxn
