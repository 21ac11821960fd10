package wire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// dtm's JSON-RPC error codes for a branch's FAILURE and ONGOING.
const (
	JSONRPCFailure = -32901
	JSONRPCOngoing = -32902
)

// callJSONRPC calls a JSON-RPC branch as dtm does: a POST to the URL
// (whose method query parameter names the method) of a JSON-RPC 2.0
// request whose params are the payload's object with dtm's four keys
// added. The answer is read as HTTP first, then by its error code.
func (t *Transport) callJSONRPC(ctx context.Context, c *Call) (Answer, error) {
	base, err := branchURLs.get(c.URL)
	if err != nil {
		return Answer{}, err
	}
	params := map[string]any{}
	if len(c.Body) > 0 {
		if err := json.Unmarshal(c.Body, &params); err != nil {
			return Answer{}, fmt.Errorf("JSON-RPC branch %s: the payload is not a JSON object: %v", c.URL, err)
		}
	}
	params["gid"], params["trans_type"], params["branch_id"], params["op"] = c.Gid, c.TransType, c.BranchID, c.Op
	var id [8]byte
	_, _ = rand.Read(id[:])
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": base.Query().Get("method"),
		"id": hex.EncodeToString(id[:]), "params": params})
	if err != nil {
		return Answer{}, err
	}
	a, err := t.http.do(ctx, http.MethodPost, base, body, c.Headers, c.Timeout)
	if err != nil {
		return Answer{}, err
	}
	ans, err := classifyHTTP(a.status, string(a.body))
	if err != nil || ans.Outcome != Success {
		return ans, err
	}
	var res struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil {
		return Answer{}, fmt.Errorf("JSON-RPC branch %s: the answer is not JSON: %s", c.URL, OneLine(string(a.body), 200))
	}
	switch {
	case res.Error == nil:
		return Answer{Outcome: Success}, nil
	case res.Error.Code == JSONRPCFailure:
		return Answer{Outcome: Failure, Message: OneLine(string(a.body), 1000)}, nil
	case res.Error.Code == JSONRPCOngoing:
		return Answer{Outcome: Ongoing}, nil
	}
	return Answer{}, fmt.Errorf("JSON-RPC error %d: %s", res.Error.Code, OneLine(res.Error.Message, 200))
}
