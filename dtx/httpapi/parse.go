package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-db/sluice/dtx"
)

// ParseRequest decodes and checks the body of a prepare, submit or abort
// call. Every error wraps dtx.ErrBadRequest and says what is wrong.
func ParseRequest(body []byte) (*dtx.Request, error) {
	r := &dtx.Request{}
	if !decodeRequest(body, r) {
		// Anything the fast decoder does not take (and every malformed
		// body) goes to encoding/json, whose result and errors are the
		// reference.
		*r = dtx.Request{}
		if err := json.Unmarshal(body, r); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON body: %v", dtx.ErrBadRequest, err)
		}
	}
	return r, r.Check()
}

// decodeRequest is a decoder for the request bodies dtm's client sends: one
// object whose keys are Request's JSON names spelled exactly, each at most
// once, with ASCII strings, plain integers, booleans, arrays of strings and
// objects of strings. It reports false for anything else (other keys, null,
// \u escapes, non-ASCII, malformed JSON), and ParseRequest then decodes the
// body with encoding/json, so that both give the same Request for what this
// one takes, and encoding/json has the last word on the rest. It exists
// because it costs a fraction of encoding/json's reflection on every submit.
func decodeRequest(b []byte, r *dtx.Request) bool {
	d := newJSONScanner(b)
	if !d.Consume('{') {
		return false
	}
	var seen uint32
	if d.Consume('}') {
		return d.End()
	}
	for {
		key, ok := d.RawKey()
		if !ok {
			return false
		}
		bit := requestKeys[string(key)] // no allocation: the compiler looks up the bytes
		if bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		switch bit {
		case keyGid:
			r.Gid, ok = d.Str()
		case keyTransType:
			r.TransType, ok = d.Str()
		case keyCustomData:
			r.CustomData, ok = d.Str()
		case keyQueryPrepared:
			r.QueryPrepared, ok = d.Str()
		case keyProtocol:
			r.Protocol, ok = d.Str()
		case keyRollbackReason:
			r.RollbackReason, ok = d.Str()
		case keyWaitResult:
			r.WaitResult, ok = d.Bool()
		case keyConcurrent:
			r.Concurrent, ok = d.Bool()
		case keyTimeoutToFail:
			r.TimeoutToFail, ok = d.Int()
		case keyRequestTimeout:
			r.RequestTimeout, ok = d.Int()
		case keyRetryInterval:
			r.RetryInterval, ok = d.Int()
		case keyRetryLimit:
			r.RetryLimit, ok = d.Int()
		case keyRetryCount:
			r.RetryCount, ok = d.Int()
		case keyBranchHeaders:
			r.BranchHeaders, ok = d.Object()
		case keyReqExtra:
			r.ReqExtra, ok = d.Object()
		case keyPayloads:
			if ok = d.Consume('['); ok {
				r.Payloads = make([]string, 0, 4) // room for the usual few steps
				if !d.Consume(']') {
					for ok {
						var p string
						if p, ok = d.Str(); ok {
							r.Payloads = append(r.Payloads, p)
							if d.Consume(']') {
								break
							}
							ok = d.Consume(',')
						}
					}
				}
			}
		case keySteps:
			if ok = d.Consume('['); ok {
				r.Steps = make([]map[string]string, 0, 4)
				if !d.Consume(']') {
					for ok {
						var m map[string]string
						if m, ok = d.Object(); ok {
							r.Steps = append(r.Steps, m)
							if d.Consume(']') {
								break
							}
							ok = d.Consume(',')
						}
					}
				}
			}
		}
		if !ok {
			return false
		}
		if d.Consume('}') {
			return d.End()
		}
		if !d.Consume(',') {
			return false
		}
	}
}

// requestKeys gives each key decodeRequest takes a bit, to refuse repeats
// (encoding/json would merge a repeated object into the first).
var requestKeys = map[string]uint32{
	"gid": keyGid, "trans_type": keyTransType, "custom_data": keyCustomData, "query_prepared": keyQueryPrepared,
	"protocol": keyProtocol, "rollback_reason": keyRollbackReason, "wait_result": keyWaitResult,
	"concurrent": keyConcurrent, "timeout_to_fail": keyTimeoutToFail, "request_timeout": keyRequestTimeout,
	"retry_interval": keyRetryInterval, "retry_limit": keyRetryLimit, "retry_count": keyRetryCount,
	"branch_headers": keyBranchHeaders, "payloads": keyPayloads, "steps": keySteps, "req_extra": keyReqExtra,
}

const (
	keyGid uint32 = 1 << iota
	keyTransType
	keyCustomData
	keyQueryPrepared
	keyProtocol
	keyRollbackReason
	keyWaitResult
	keyConcurrent
	keyTimeoutToFail
	keyRequestTimeout
	keyRetryInterval
	keyRetryLimit
	keyRetryCount
	keyBranchHeaders
	keyPayloads
	keySteps
	keyReqExtra
)
