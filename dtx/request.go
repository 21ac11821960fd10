package dtx

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluice-db/sluice/dtx/internal/wire"
)

// Request is the JSON body of dtm's prepare, submit and abort calls (dtm's
// TransBase with its TransOptions inlined).
type Request struct {
	Gid            string              `json:"gid"`
	TransType      string              `json:"trans_type"`
	CustomData     string              `json:"custom_data,omitempty"`
	Steps          []map[string]string `json:"steps,omitempty"`
	Payloads       []string            `json:"payloads,omitempty"`
	QueryPrepared  string              `json:"query_prepared,omitempty"`
	Protocol       string              `json:"protocol"`
	RollbackReason string              `json:"rollback_reason,omitempty"`
	// ReqExtra carries a workflow's final status, reason and result.
	ReqExtra map[string]string `json:"req_extra,omitempty"`
	Options
}

// Check checks a request a transport decoded (httpapi.ParseRequest, gRPC,
// JSON-RPC). Every error wraps ErrBadRequest.
func (r *Request) Check() error { return r.check() }

func (r *Request) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, a...)...)
	}
	r.Gid = escape(r.Gid)
	if r.Gid == "" {
		return bad("gid is empty")
	}
	if len(r.Gid) > 128 {
		return bad("gid is longer than 128 bytes")
	}
	switch r.TransType {
	case TypeSaga, TypeTCC, TypeMsg, TypeXA, TypeWorkflow:
	case "":
		return bad("trans_type is empty (want saga, tcc, msg, xa or workflow)")
	default:
		return bad("unsupported trans_type %q (want saga, tcc, msg, xa or workflow)", r.TransType)
	}
	switch r.Protocol {
	case "", wire.HTTP, wire.GRPC, wire.JSONRPC:
	default:
		return bad("unsupported protocol %q (want http, grpc or json-rpc)", r.Protocol)
	}
	if len(r.Payloads) == 0 {
		// dtm's old format puts each step's payload in steps[].data.
		// "payloads":[] decodes to an empty, non-nil slice: decide on a
		// flag, not on nil (indexing the empty slice crashed the server).
		old := false
		for _, st := range r.Steps {
			if _, ok := st["data"]; ok {
				old = true
				break
			}
		}
		if old {
			r.Payloads = make([]string, len(r.Steps))
			for i, st := range r.Steps {
				r.Payloads[i] = st["data"]
				delete(st, "data")
			}
		}
	}
	if len(r.Payloads) != 0 && len(r.Payloads) != len(r.Steps) {
		return bad("%d payloads for %d steps", len(r.Payloads), len(r.Steps))
	}
	if r.TimeoutToFail < 0 || r.RequestTimeout < 0 || r.RetryInterval < 0 || r.RetryLimit < 0 {
		return bad("negative option value")
	}
	ops := actionOnly[:]
	if r.TransType == TypeSaga {
		ops = actionCompensate[:]
	}
	for i, s := range r.Steps {
		for _, op := range ops {
			u := s[op]
			if u == "" {
				continue // dtm treats an empty URL as a branch that always succeeds
			}
			if strings.HasPrefix(u, TopicPrefix) {
				if r.TransType != TypeMsg || op != OpAction || strings.TrimPrefix(u, TopicPrefix) == "" {
					return bad("step %d %s: a topic is a message step's action", i+1, op)
				}
				delete(s, keySubscribers) // set by expandTopics, never by a client
				continue
			}
			if err := wire.CheckURL(u, r.Protocol); err != nil {
				return bad("step %d %s: %v", i+1, op, err)
			}
		}
	}
	if r.TransType == TypeSaga && r.CustomData != "" {
		if _, err := parseSagaCustom(r.CustomData, len(r.Steps)); err != nil {
			return bad("custom_data: %v", err)
		}
	}
	if r.TransType == TypeMsg && r.CustomData != "" {
		var mc msgCustom
		if err := json.Unmarshal([]byte(r.CustomData), &mc); err != nil {
			return bad("custom_data: %v", err)
		}
	}
	if r.QueryPrepared != "" {
		if err := wire.CheckURL(r.QueryPrepared, r.Protocol); err != nil {
			return bad("query_prepared: %v", err)
		}
	}
	return nil
}

var (
	actionOnly       = [...]string{OpAction}
	actionCompensate = [...]string{OpAction, OpCompensate}
)

// escape drops the characters dtm strips from gids.
func escape(s string) string {
	if !strings.ContainsAny(s, "\n\r;") {
		return s // the usual gid: nothing to drop, nothing to allocate
	}
	return strings.NewReplacer("\n", "", "\r", "", ";", "").Replace(s)
}

// branchURLs lists the URLs of a request that must be reachable.
func (r *Request) branchURLs() []string {
	var out []string
	for _, s := range r.Steps {
		for _, op := range []string{OpAction, OpCompensate} {
			if s[op] != "" && !strings.HasPrefix(s[op], TopicPrefix) {
				out = append(out, s[op])
			}
		}
	}
	if r.QueryPrepared != "" {
		out = append(out, r.QueryPrepared)
	}
	return out
}

// global builds the stored transaction for a request.
func (r *Request) global(status string) *Global {
	g := &Global{
		Gid:            r.Gid,
		TransType:      r.TransType,
		Status:         status,
		Steps:          r.Steps,
		Payloads:       r.Payloads,
		QueryPrepared:  r.QueryPrepared,
		Protocol:       r.protocol(),
		CustomData:     r.CustomData,
		Options:        r.Options,
		RollbackReason: r.RollbackReason,
	}
	g.Options.WaitResult = false // a property of one request, not of the transaction
	return g
}

// protocol is the request's protocol, http when it names none.
func (r *Request) protocol() string {
	if r.Protocol == "" {
		return "http"
	}
	return r.Protocol
}

// branchID is dtm's generated branch id: the step's number, at least two
// digits ("01").
func branchID(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// GenBranches lays out the branches of a saga or message from its steps: a
// saga step becomes a compensate and an action branch (in that order, as dtm
// stores them), a message step an action branch. TCC branches are
// registered later. Stores may derive branches with it instead of storing them.
func GenBranches(g *Global) []Branch {
	n := len(g.Steps)
	if g.TransType == TypeSaga {
		n *= 2
	}
	out := make([]Branch, 0, n)
	for i, s := range g.Steps {
		var data []byte
		if i < len(g.Payloads) {
			data = payloadBytes(g.Payloads[i])
		}
		id := branchID(i + 1)
		switch g.TransType {
		case TypeSaga:
			out = append(out,
				Branch{Gid: g.Gid, BranchID: id, Op: OpCompensate, URL: s[OpCompensate], BinData: data, Status: StatusPrepared},
				Branch{Gid: g.Gid, BranchID: id, Op: OpAction, URL: s[OpAction], BinData: data, Status: StatusPrepared})
		case TypeMsg:
			urls := topicURLs(s)
			for j, u := range urls {
				bid := id
				if len(urls) > 1 {
					bid = id + "-" + branchID(j+1) // dtm's ids for a topic's subscribers
				}
				out = append(out, Branch{Gid: g.Gid, BranchID: bid, Op: OpAction, URL: u, BinData: data, Status: StatusPrepared})
			}
		}
	}
	return out
}

// payloadBytes is a branch's body sharing the payload's memory instead of
// copying it: a payload may be megabytes, and a copy per saga lived as long
// as the transaction in every store's memory (issue 30: a flood of 1 MB
// submits held both). Branch.BinData is only ever read (sent to the
// branch, encoded by the stores), never written.
func payloadBytes(p string) []byte {
	if p == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(p), len(p))
}

// xaBranches are the two branches dtm's registerBranch stores for XA: the
// same URL, called with op rollback or commit.
func xaBranches(gid, branchID, data, url string) []Branch {
	return []Branch{
		{Gid: gid, BranchID: branchID, Op: OpRollback, URL: url, BinData: []byte(data), Status: StatusPrepared},
		{Gid: gid, BranchID: branchID, Op: OpCommit, URL: url, BinData: []byte(data), Status: StatusPrepared},
	}
}

// tccBranches are the two branches dtm's registerBranch stores for TCC.
func tccBranches(gid, branchID, data, confirm, cancel string) []Branch {
	return []Branch{
		{Gid: gid, BranchID: branchID, Op: OpCancel, URL: cancel, BinData: []byte(data), Status: StatusPrepared},
		{Gid: gid, BranchID: branchID, Op: OpConfirm, URL: confirm, BinData: []byte(data), Status: StatusPrepared},
	}
}

// sagaCustom is a concurrent saga's custom_data: orders maps a step index
// to the step indexes that must succeed before it starts.
type sagaCustom struct {
	Orders     map[int][]int `json:"orders"`
	Concurrent bool          `json:"concurrent"`
}

func parseSagaCustom(s string, steps int) (*sagaCustom, error) {
	sc := &sagaCustom{}
	if s == "" {
		return sc, nil
	}
	if err := json.Unmarshal([]byte(s), sc); err != nil {
		return nil, err
	}
	for k, pres := range sc.Orders {
		if k < 0 || k >= steps {
			return nil, fmt.Errorf("order for step %d, but there are %d steps", k, steps)
		}
		for _, p := range pres {
			if p < 0 || p >= steps || p == k {
				return nil, fmt.Errorf("step %d waits for step %d, which does not exist", k, p)
			}
		}
	}
	if hasCycle(sc.Orders, steps) {
		return nil, fmt.Errorf("branch orders form a cycle")
	}
	return sc, nil
}

func hasCycle(orders map[int][]int, n int) bool {
	state := make([]int, n) // 0 new, 1 visiting, 2 done
	var visit func(int) bool
	visit = func(i int) bool {
		if state[i] == 1 {
			return true
		}
		if state[i] == 2 {
			return false
		}
		state[i] = 1
		for _, p := range orders[i] {
			if visit(p) {
				return true
			}
		}
		state[i] = 2
		return false
	}
	for i := 0; i < n; i++ {
		if visit(i) {
			return true
		}
	}
	return false
}

type msgCustom struct {
	Delay uint64 `json:"delay"` // seconds before the branches are called
}
