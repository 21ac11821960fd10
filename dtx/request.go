package dtx

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
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
	Options
}

// ParseRequest decodes and checks a request body. Every error wraps
// ErrBadRequest and says what is wrong.
func ParseRequest(body []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	return &r, r.check()
}

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
	case TypeSaga, TypeTCC, TypeMsg:
	case "":
		return bad("trans_type is empty (want saga, tcc or msg)")
	default:
		return bad("unsupported trans_type %q (want saga, tcc or msg)", r.TransType)
	}
	if r.Protocol != "" && r.Protocol != "http" {
		return bad("unsupported protocol %q: sluice speaks dtm's HTTP protocol only", r.Protocol)
	}
	if len(r.Payloads) != 0 && len(r.Payloads) != len(r.Steps) {
		return bad("%d payloads for %d steps", len(r.Payloads), len(r.Steps))
	}
	if r.TimeoutToFail < 0 || r.RequestTimeout < 0 || r.RetryInterval < 0 || r.RetryLimit < 0 {
		return bad("negative option value")
	}
	for i, s := range r.Steps {
		ops := []string{OpAction}
		if r.TransType == TypeSaga {
			ops = append(ops, OpCompensate)
		}
		for _, op := range ops {
			u := s[op]
			if u == "" && op == OpCompensate {
				continue // dtm treats an empty URL as a branch that always succeeds
			}
			if strings.HasPrefix(u, "topic://") {
				return bad("step %d: topics are not supported", i+1)
			}
			if err := CheckURL(u); err != nil {
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
		if err := CheckURL(r.QueryPrepared); err != nil {
			return bad("query_prepared: %v", err)
		}
	}
	return nil
}

// CheckURL accepts absolute http and https URLs with a host.
func CheckURL(s string) error {
	if s == "" {
		return fmt.Errorf("empty URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("bad URL %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q: only http and https branches are supported", s)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", s)
	}
	return nil
}

// escape drops the characters dtm strips from gids.
func escape(s string) string {
	return strings.NewReplacer("\n", "", "\r", "", ";", "").Replace(s)
}

// branchURLs lists the URLs of a request that must be reachable.
func (r *Request) branchURLs() []string {
	var out []string
	for _, s := range r.Steps {
		for _, op := range []string{OpAction, OpCompensate} {
			if s[op] != "" {
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
		Protocol:       "http",
		CustomData:     r.CustomData,
		Options:        r.Options,
		RollbackReason: r.RollbackReason,
	}
	g.Options.WaitResult = false // a property of one request, not of the transaction
	return g
}

// GenBranches lays out the branches of a saga or message from its steps: a
// saga step becomes a compensate and an action branch (in that order, as dtm
// stores them), a message step an action branch. TCC branches are
// registered later. Stores may derive branches with it instead of storing them.
func GenBranches(g *Global) []Branch {
	var out []Branch
	for i, s := range g.Steps {
		var data []byte
		if i < len(g.Payloads) {
			data = []byte(g.Payloads[i])
		}
		id := fmt.Sprintf("%02d", i+1)
		switch g.TransType {
		case TypeSaga:
			out = append(out,
				Branch{Gid: g.Gid, BranchID: id, Op: OpCompensate, URL: s[OpCompensate], BinData: data, Status: StatusPrepared},
				Branch{Gid: g.Gid, BranchID: id, Op: OpAction, URL: s[OpAction], BinData: data, Status: StatusPrepared})
		case TypeMsg:
			out = append(out, Branch{Gid: g.Gid, BranchID: id, Op: OpAction, URL: s[OpAction], BinData: data, Status: StatusPrepared})
		}
	}
	return out
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
