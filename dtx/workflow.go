package dtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TypeWorkflow is dtm's workflow (client/workflow): the client runs the
// steps itself and records each outcome as a branch; the coordinator keeps
// that record, and when the client vanishes before it finishes, it calls
// the workflow's callback (query_prepared) so that the business service
// resumes the workflow from the record.
const TypeWorkflow = "workflow"

// workflowCustom is a workflow's custom_data: its registered name and the
// input it was started with.
type workflowCustom struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// PrepareWorkflow stores a new workflow as prepared, or finds the stored
// one: either way it returns the transaction and the steps recorded so far
// (none for a new one), which the client replays.
func (c *Coordinator) PrepareWorkflow(ctx context.Context, r *Request) (*Global, []Branch, error) {
	c.working.Add(1)
	defer c.working.Add(-1)
	if r.TransType != TypeWorkflow {
		return nil, nil, fmt.Errorf("%w: prepareWorkflow wants trans_type workflow, not %q", ErrBadRequest, r.TransType)
	}
	if err := c.checkReachable(ctx, r.Protocol, r.branchURLs()); err != nil {
		return nil, nil, err
	}
	g := r.global(StatusPrepared)
	now := time.Now().UTC()
	g.CreateTime, g.UpdateTime = now, now
	// As dtm: recovery resumes a workflow its client has not ended one
	// retry interval after it began (not at timeout_to_fail).
	g.NextCronTime = now.Add(c.retryInterval(g))
	err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Create: true, Global: g})
	if errors.Is(err, ErrExists) {
		return c.store.Get(ctx, g.Gid)
	}
	if err != nil {
		return nil, nil, err
	}
	return g, nil, nil
}

// registerWorkflowStep records one step outcome of a prepared workflow:
// its op (action, compensate, commit, rollback), status and result data.
func (c *Coordinator) registerWorkflowStep(ctx context.Context, gid, bid string, fields map[string]string) error {
	switch fields["status"] {
	case StatusSucceed, StatusFailed:
	default:
		return fmt.Errorf("%w: a workflow step's status is succeed or failed, not %q", ErrBadRequest, fields["status"])
	}
	if fields["op"] == "" {
		return fmt.Errorf("%w: a workflow step needs its op", ErrBadRequest)
	}
	// dtm's unique key on (gid, branch_id, op) refuses a step recorded
	// twice; one workflow records its steps one at a time.
	_, have, err := c.store.Get(ctx, gid)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	for _, b := range have {
		if b.BranchID == bid && b.Op == fields["op"] {
			return fmt.Errorf("workflow %s already recorded step %s %s: %w", gid, bid, b.Op, ErrFailure)
		}
	}
	now := time.Now().UTC()
	b := Branch{Gid: gid, BranchID: bid, Op: fields["op"], BinData: []byte(fields["data"]),
		Status: fields["status"], CreateTime: now, FinishTime: now}
	err = c.commit.do(ctx, &Mutation{Gid: gid, NewBranches: []Branch{b}, IfStatus: []string{StatusPrepared}})
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		return fmt.Errorf("no transaction with gid %s and status prepared: %w", gid, ErrFailure)
	}
	return err
}

// submitWorkflow ends a prepared workflow with the status, reason and
// result its client reports in req_extra.
func (c *Coordinator) submitWorkflow(ctx context.Context, r *Request) error {
	status := r.ReqExtra["status"]
	if status != StatusSucceed && status != StatusFailed {
		return fmt.Errorf("%w: a workflow is submitted with req_extra.status succeed or failed, not %q", ErrBadRequest, status)
	}
	cur, _, err := c.store.Get(ctx, r.Gid)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("no workflow with gid %s was prepared: %w", r.Gid, ErrFailure)
	}
	if err != nil {
		return err
	}
	if cur.TransType != TypeWorkflow || cur.Status != StatusPrepared {
		return fmt.Errorf("trans type '%s' with status '%s' cannot end as a workflow: %w", cur.TransType, cur.Status, ErrFailure)
	}
	now := time.Now().UTC()
	g := cur.Clone()
	g.Status, g.UpdateTime, g.Result = status, now, r.ReqExtra["result"]
	if reason := r.ReqExtra["rollback_reason"]; reason != "" {
		g.RollbackReason = reason
	}
	c.finish(g, now)
	// IfStatus alone, not the owner: a coordinator driving the recovery
	// callback holds the lease while the resumed workflow submits itself.
	if err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Global: g, IfStatus: []string{StatusPrepared}}); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("%v, cannot end it: %w", err, ErrFailure)
		}
		return err
	}
	c.metrics.Transactions.WithLabelValues(g.TransType, g.Status).Inc()
	return nil
}

// workflow drives a prepared workflow that recovery found: its client has
// not ended it, so the workflow's callback asks the business service to
// resume it from the recorded steps, as dtm does. Steps are idempotent by
// dtm's design (the barrier), so a resume beside a slow client is safe.
func (r *run) workflow(ctx context.Context) error {
	if r.g.Status != StatusPrepared {
		return nil
	}
	if err := r.keepLease(ctx); err != nil {
		return err
	}
	var wc workflowCustom
	if err := json.Unmarshal([]byte(r.g.CustomData), &wc); err != nil {
		r.errs[-1] = "custom_data: " + err.Error()
		return r.retryLater(ctx, -1, false)
	}
	body := wc.Data
	if r.g.Protocol == "grpc" {
		body = protoBytesField1(wc.Data) // wfpb.WorkflowData{Data}
	}
	res, err := r.c.callURL(ctx, r.g, r.g.QueryPrepared, "00", wc.Name, body)
	// The resumed workflow records its steps and submits itself through
	// the API while this run holds the lease: the run's copy is stale.
	cur, branches, gerr := r.c.store.Get(ctx, r.g.Gid)
	if gerr != nil {
		return gerr
	}
	if cur.Finished() {
		return nil
	}
	if cur.Owner != r.token {
		return &ConflictError{Gid: cur.Gid, Status: cur.Status, LostLease: true}
	}
	r.g, r.branches, r.saved = cur, branches, cur.Status
	switch res {
	case ResultSuccess, ResultOngoing:
		// Answered but not finished (a step asked to be retried later).
		return r.retryLater(ctx, -1, res == ResultOngoing)
	}
	if err == nil {
		err = fmt.Errorf("callback returned %s", res)
	}
	r.errs[-1] = err.Error()
	return r.retryLater(ctx, -1, false)
}

// protoBytesField1 encodes a protobuf message whose only field, number 1,
// is bytes: dtm's wfpb.WorkflowData, the gRPC callback's request.
func protoBytesField1(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	out := make([]byte, 0, len(b)+11)
	out = append(out, 0x0a) // field 1, wire type 2 (length-delimited)
	for n := uint64(len(b)); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n)|0x80)
	}
	return append(out, b...)
}
