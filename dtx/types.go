// Package dtx is sluice's distributed transaction coordinator: the state
// machines of dtm's saga, TCC and 2-phase message modes, the store contract
// they persist through (with group commit), branch calls with timeouts,
// backoff and a retry limit, and lease-based recovery shared by several
// coordinators. The HTTP protocol lives in dtx/httpapi, the stores in
// dtx/boltstore and dtx/mysqlstore, and the service-side barrier in dtx/barrier.
package dtx

import (
	"encoding/json"
	"errors"
	"time"
)

// Global transaction statuses, as dtm names them.
const (
	StatusPrepared  = "prepared"
	StatusSubmitted = "submitted"
	StatusAborting  = "aborting"
	StatusSucceed   = "succeed"
	StatusFailed    = "failed"
)

// Transaction types.
const (
	TypeSaga = "saga"
	TypeTCC  = "tcc"
	TypeMsg  = "msg"
	TypeXA   = "xa"
)

// Registered reports whether a type's branches are registered one by one
// while it is prepared (TCC, XA) rather than laid out from its steps.
func Registered(transType string) bool { return transType == TypeTCC || transType == TypeXA }

// KeepsBranches reports whether a type's branches are stored as they come
// (TCC and XA registrations, a workflow's recorded steps) rather than
// generated again from the steps (GenBranches).
func KeepsBranches(transType string) bool { return Registered(transType) || transType == TypeWorkflow }

// Branch operations.
const (
	OpAction     = "action"
	OpCompensate = "compensate"
	OpTry        = "try"
	OpConfirm    = "confirm"
	OpCancel     = "cancel"
	OpCommit     = "commit"
	OpRollback   = "rollback"
)

// Results a branch returns, as dtm defines them: in the body, or as HTTP 409
// (FAILURE) and 425 (ONGOING).
const (
	ResultSuccess = "SUCCESS"
	ResultFailure = "FAILURE"
	ResultOngoing = "ONGOING"
)

// Errors the coordinator returns. The HTTP layer maps them to status codes.
var (
	// ErrFailure: the request is valid but the transaction cannot do it
	// (wrong status, or a wait_result transaction that did not succeed). 409.
	ErrFailure = errors.New(ResultFailure)
	// ErrOngoing: not finished yet. 425.
	ErrOngoing = errors.New(ResultOngoing)
	// ErrBadRequest: malformed or inconsistent input; nothing was stored. 400.
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound: no transaction with that gid. 404.
	ErrNotFound = errors.New("transaction not found")
	// ErrExists: Create found the gid already stored.
	ErrExists = errors.New("transaction already exists")
	// ErrConflict: a Mutation's precondition (status or owner) did not hold.
	ErrConflict = errors.New("precondition failed")
)

// Options are dtm's per-transaction options (TransOptions), kept as sent.
type Options struct {
	WaitResult     bool              `json:"wait_result,omitempty"`
	TimeoutToFail  int64             `json:"timeout_to_fail,omitempty"` // seconds
	RequestTimeout int64             `json:"request_timeout,omitempty"` // seconds
	RetryInterval  int64             `json:"retry_interval,omitempty"`  // seconds
	BranchHeaders  map[string]string `json:"branch_headers,omitempty"`
	Concurrent     bool              `json:"concurrent"`
	RetryLimit     int64             `json:"retry_limit,omitempty"`
	RetryCount     int64             `json:"retry_count,omitempty"`
}

// Global is one global transaction as stored. Times are UTC; zero means unset.
type Global struct {
	Gid            string              `json:"gid"`
	TransType      string              `json:"trans_type"`
	Status         string              `json:"status"`
	Steps          []map[string]string `json:"steps,omitempty"`
	Payloads       []string            `json:"payloads,omitempty"`
	QueryPrepared  string              `json:"query_prepared,omitempty"`
	Protocol       string              `json:"protocol,omitempty"`
	CustomData     string              `json:"custom_data,omitempty"`
	Options        Options             `json:"options"`
	CreateTime     time.Time           `json:"create_time"`
	UpdateTime     time.Time           `json:"update_time"`
	FinishTime     time.Time           `json:"finish_time"`
	RollbackTime   time.Time           `json:"rollback_time"`
	RollbackReason string              `json:"rollback_reason,omitempty"`
	Result         string              `json:"result,omitempty"`
	// NextCronTime is when recovery should look at the transaction again;
	// zero once it is finished (or stuck).
	NextCronTime time.Time `json:"next_cron_time"`
	// Retries counts consecutive failed attempts; it drives the backoff and
	// the retry limit and is reset by progress.
	Retries int `json:"retries"`
	// Owner is the lease token of the coordinator driving the transaction;
	// LeaseUntil is when that lease lapses and recovery may claim it.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until"`
	// Stuck names the branch that exceeded the retry limit; recovery leaves a
	// stuck transaction alone until an operator resets it.
	Stuck string `json:"stuck,omitempty"`
	// BranchStatus holds every branch that left prepared, by BranchKey, so
	// that a store can keep a transaction's whole state in one row.
	BranchStatus map[string]BranchState `json:"branch_status,omitempty"`
}

// BranchState is a branch's status as the transaction row records it.
type BranchState struct {
	Status     string    `json:"status"`
	FinishTime time.Time `json:"finish_time"`
}

// BranchKey names a branch in Global.BranchStatus.
func BranchKey(branchID, op string) string { return branchID + "/" + op }

// OverlayStatus applies the statuses recorded in g to branches.
func (g *Global) OverlayStatus(branches []Branch) {
	for i := range branches {
		if st, ok := g.BranchStatus[BranchKey(branches[i].BranchID, branches[i].Op)]; ok {
			branches[i].Status, branches[i].FinishTime = st.Status, st.FinishTime
		}
	}
}

// Finished reports whether the transaction reached a final status.
func (g *Global) Finished() bool { return g.Status == StatusSucceed || g.Status == StatusFailed }

// Clone returns a copy that shares nothing the driver changes later, for
// handing state to the committer.
func (g *Global) Clone() *Global {
	c := *g
	if g.BranchStatus != nil {
		c.BranchStatus = make(map[string]BranchState, len(g.BranchStatus))
		for k, v := range g.BranchStatus {
			c.BranchStatus[k] = v
		}
	}
	return &c
}

// Branch is one operation of one branch: a saga step has an action and a
// compensate Branch with the same BranchID.
type Branch struct {
	Gid        string    `json:"gid"`
	BranchID   string    `json:"branch_id"`
	Op         string    `json:"op"`
	URL        string    `json:"url"`
	BinData    []byte    `json:"bin_data,omitempty"`
	Status     string    `json:"status"`
	CreateTime time.Time `json:"create_time"`
	FinishTime time.Time `json:"finish_time"`
}

// BranchUpdate changes the status of one stored branch.
type BranchUpdate struct {
	BranchID   string
	Op         string
	Status     string
	FinishTime time.Time
}

// Mutation is one atomic change to one transaction. The store applies a
// batch of mutations in one store transaction (group commit); each mutation
// either applies whole or, when its precondition fails, not at all.
type Mutation struct {
	Gid string
	// Create inserts Global with NewBranches; ErrExists when the gid exists.
	Create bool
	// Global is the full new row, written when the precondition holds
	// (nil: the row is left as it is, e.g. when only branches are added).
	Global *Global
	// NewBranches are appended in order after the transaction's branches.
	NewBranches []Branch
	// BranchUpdates change stored branches.
	BranchUpdates []BranchUpdate
	// IfStatus: the stored status must be one of these (empty: any).
	IfStatus []string
	// IfOwner: the stored owner must equal it (empty: any owner).
	IfOwner string
}

func (m *Mutation) statusOK(cur string) bool {
	if len(m.IfStatus) == 0 {
		return true
	}
	for _, s := range m.IfStatus {
		if s == cur {
			return true
		}
	}
	return false
}

// Check tells whether the mutation's precondition holds against the stored
// global; stores call it so that every store judges preconditions alike.
func (m *Mutation) Check(cur *Global) error {
	if !m.statusOK(cur.Status) {
		return &ConflictError{Gid: m.Gid, Status: cur.Status}
	}
	if m.IfOwner != "" && cur.Owner != m.IfOwner {
		return &ConflictError{Gid: m.Gid, Status: cur.Status, LostLease: true}
	}
	return nil
}

// ConflictError says why a mutation's precondition failed.
type ConflictError struct {
	Gid       string
	Status    string
	LostLease bool
}

func (e *ConflictError) Error() string {
	if e.LostLease {
		return "transaction " + e.Gid + " is now driven by another coordinator"
	}
	return "transaction " + e.Gid + " has status '" + e.Status + "'"
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// MarshalOptions is how stores persist Options.
func MarshalOptions(o Options) string {
	b, _ := json.Marshal(o)
	return string(b)
}
