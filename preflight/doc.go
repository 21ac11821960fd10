// Package preflight holds the checks before work, as DM's check-task:
// everything a copy and replication need is checked before a --mode all
// copy starts, so that a source without REPLICATION SLAVE or with
// binlog_format=STATEMENT is refused at once rather than after hours of
// copying (issue 16). sluice check runs them alone (Run, Print); sluice
// migrate runs them first (Before), and the table selection's own checks
// (CheckSelected, RefuseUnmatchedEarly) before it writes to the target.
package preflight
