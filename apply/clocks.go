package apply

import "github.com/sluice-db/sluice/internal/stagetime"

// Clocks time the applier's part of a pipeline (internal/stagetime); nil
// clocks do not time. Submit gets Submit's waits for room in the queue
// (wait_output of the stage that submits). Schedule is the scheduler:
// waiting for items (wait_input), for a group's writeset to stop
// conflicting (wait_conflict), for room in a worker's channel or, before
// a DDL or a flush, for every group to commit (wait_output). Worker is the
// workers: waiting for a group (wait_input), round trips of statements
// (execute, execute_commit), the ordered-commit wait (wait_turn) and the
// COMMIT round trip (commit); their work is building the SQL.
type Clocks struct {
	Submit, Schedule, Worker *stagetime.Clock
}

// SetClocks sets the clocks; call it before Start.
func (a *Applier) SetClocks(c Clocks) { a.clocks = c }
