// Package wire is dtx's transport: how the coordinator calls a branch and
// how it checks a branch URL before it stores a transaction. The state
// machine in dtx sees only the Caller interface and dtm's outcomes; a
// change to how a branch is called (HTTP, gRPC, JSON-RPC) stays here.
package wire

import (
	"context"
	"time"
)

// dtm's branch outcomes.
const (
	Success = "SUCCESS"
	Failure = "FAILURE"
	Ongoing = "ONGOING"
)

// Protocols a transaction can name (dtm's TransGlobal.Protocol).
const (
	HTTP    = "http"
	GRPC    = "grpc"
	JSONRPC = "json-rpc"
)

// Call is one branch call: the branch's URL and payload, and dtm's four
// parameters (sent as the query string over HTTP, metadata over gRPC).
type Call struct {
	URL       string
	Protocol  string // the transaction's: HTTP (or ""), GRPC or JSONRPC
	Gid       string
	TransType string
	BranchID  string
	Op        string
	Body      []byte
	Headers   map[string]string
	Timeout   time.Duration
}

// Answer is a branch's answer in dtm's terms.
type Answer struct {
	Outcome string // Success, Failure or Ongoing
	Message string // with Failure: the business's own words, if any
}

// Caller calls branches. The two methods are all the state machine needs
// of a transport.
type Caller interface {
	// Call makes one call and classifies the answer. An error means the
	// outcome is unknown (a timeout, a refused connection, an answer dtm
	// does not define) and the call is to be retried.
	Call(ctx context.Context, c *Call) (Answer, error)
	// Check refuses a URL the protocol cannot call, and (when probe is set)
	// one whose host does not accept a connection.
	Check(ctx context.Context, url, protocol string, probe bool) error
}
