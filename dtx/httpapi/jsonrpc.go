package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/internal/wire"
)

// jsonRPCRequest is a JSON-RPC 2.0 call to dtm's /api/json-rpc.
type jsonRPCRequest struct {
	Method  string          `json:"method"`
	JSONRPC string          `json:"jsonrpc"`
	Params  json.RawMessage `json:"params"`
	ID      string          `json:"id"`
}

type jsonRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// jsonRPC serves dtm's JSON-RPC protocol: the methods newGid, prepare,
// submit, abort and registerBranch, whose params are the bodies of the
// HTTP routes of the same names. Like dtm it always answers 200; an error
// is in the body, with dtm's code for FAILURE.
func (h *handler) jsonRPC(w http.ResponseWriter, r *http.Request) {
	var req jsonRPCRequest
	var result any
	var busy error
	jerr := func() *jsonRPCError {
		body, err := h.readBody(w, r)
		if errors.Is(err, errBusy) {
			busy = err
			return nil
		}
		if err != nil {
			return &jsonRPCError{Code: -32700, Message: err.Error()}
		}
		err = json.Unmarshal(body.b, &req)
		defer h.putBody(body) // held until the call is done: what it decoded is in use

		switch {
		case err != nil:
			return &jsonRPCError{Code: -32700, Message: "Parse json error: " + err.Error()}
		case req.ID == "" || req.JSONRPC != "2.0":
			return &jsonRPCError{Code: -32600, Message: "Bad json request: want jsonrpc 2.0 and an id"}
		}
		switch req.Method {
		case "newGid":
			result = map[string]string{"gid": h.c.NewGid()}
		case "prepare":
			err = doTrans(r.Context(), h.c.Prepare, req.Params)
		case "submit":
			err = doTrans(r.Context(), h.c.Submit, req.Params)
		case "abort":
			err = doTrans(r.Context(), h.c.Abort, req.Params)
		case "registerBranch":
			err = h.doRegisterBranch(r.Context(), req.Params)
		default:
			return &jsonRPCError{Code: -32601, Message: fmt.Sprintf("Method not found: %s", req.Method)}
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, dtx.ErrFailure):
			return &jsonRPCError{Code: wire.JSONRPCFailure, Message: err.Error()}
		case errors.Is(err, dtx.ErrOngoing):
			return &jsonRPCError{Code: wire.JSONRPCOngoing, Message: err.Error()}
		}
		// dtm answers every other error, a bad request too, as internal.
		return &jsonRPCError{Code: -32603, Message: err.Error()}
	}()
	if busy != nil {
		writeErr(w, busy) // 503: the transport's answer, before any JSON-RPC
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": jerr, "result": result})
}
