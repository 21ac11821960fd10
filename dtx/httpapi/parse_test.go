package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/dtx"
)

// dtmcliSaga is a saga body as dtm's client marshals it.
const dtmcliSaga = `{"gid":"g1","trans_type":"saga","wait_result":true,"concurrent":false,"steps":[` +
	`{"action":"http://127.0.0.1:8081/api/busi/TransOut","compensate":"http://127.0.0.1:8081/api/busi/TransOutCompensate"},` +
	`{"action":"http://127.0.0.1:8081/api/busi/TransIn","compensate":"http://127.0.0.1:8081/api/busi/TransInCompensate"}],` +
	`"payloads":["{\"amount\":30,\"user_id\":1}","{\"amount\":30,\"user_id\":2}"],"protocol":"http"}`

// decodeCases are bodies the fast decoder must take (fast: true) or leave
// to encoding/json; either way ParseRequest must decode them as
// encoding/json does.
var decodeCases = []struct {
	body string
	fast bool
}{
	{dtmcliSaga, true},
	{`{"gid":"g2","trans_type":"msg","concurrent":false,"steps":[{"action":"http://a/x"}],"payloads":["{}"],"query_prepared":"http://a/q","protocol":"http"}`, true},
	{`{"gid":"g3","trans_type":"tcc","custom_data":"c","rollback_reason":"r","timeout_to_fail":35,"request_timeout":-3,"retry_interval":0,"retry_limit":123456789012345678,"retry_count":7,"branch_headers":{"k":"v","k2":""},"concurrent":true,"wait_result":false}`, true},
	{` { "gid" : "g4" ,	"steps" : [ ] , "payloads" : [ ] , "branch_headers" : { } } ` + "\n", true},
	{`{}`, true},
	{`{"gid":"a\"b\\c\/d\b\f\n\r\te"}`, true},
	{`{"steps":[{},{"action":"x","action":"y"}]}`, true},
	// encoding/json's part: other spellings, escapes, types and repeats.
	{`{"GID":"g5"}`, false},
	{`{"gid":"\u00e9"}`, false},
	{`{"gid":"é"}`, false},
	{`{"gid":null}`, false},
	{`{"steps":null}`, false},
	{`{"steps":[null]}`, false},
	{`{"gid":"a","gid":"b"}`, false},
	{`{"branch_headers":{"a":"1"},"branch_headers":{"b":"2"}}`, false},
	{`{"unknown":1,"gid":"g6"}`, false},
	{`{"timeout_to_fail":1e3}`, false},
	{`{"timeout_to_fail":1.0}`, false},
	{`{"timeout_to_fail":1234567890123456789}`, false},
	{`{"timeout_to_fail":01}`, false},
	{`{"timeout_to_fail":-}`, false},
	{`{"wait_result":truex}`, false},
	{`{"wait_result":"true"}`, false},
	{`{"gid":1}`, false},
	{`{"gid":"g7"} x`, false},
	{`{"gid":"g7"`, false},
	{`{"gid":"a` + "\x01" + `"}`, false},
	{`[1,2]`, false},
	{``, false},
	{`{"steps":[{"action":1}]}`, false},
	{`{"payloads":["a",]}`, false},
	{`{"gid":"g8",}`, false},
}

func TestDecodeRequestMatchesEncodingJSON(t *testing.T) {
	for _, c := range decodeCases {
		var fast dtx.Request
		ok := decodeRequest([]byte(c.body), &fast)
		if ok != c.fast {
			t.Errorf("%s: fast decoder took it: %v, want %v", c.body, ok, c.fast)
		}
		var ref dtx.Request
		refErr := json.Unmarshal([]byte(c.body), &ref)
		if ok && refErr != nil {
			t.Errorf("%s: fast decoder took a body encoding/json refuses: %v", c.body, refErr)
		}
		if ok && !reflect.DeepEqual(fast, ref) {
			t.Errorf("%s:\nfast %#v\njson %#v", c.body, fast, ref)
		}
	}
}

// TestParseRequestErrors: bad bodies get encoding/json's message, as before
// the fast decoder.
func TestParseRequestErrors(t *testing.T) {
	for _, body := range []string{`{"gid": "x1", "trans_type": `, `[1,2]`, `{"gid":1}`, `{"gid":"a"} x`} {
		var ref dtx.Request
		want := json.Unmarshal([]byte(body), &ref)
		_, err := ParseRequest([]byte(body))
		if want == nil || err == nil || !strings.Contains(err.Error(), "malformed JSON body: "+want.Error()) {
			t.Errorf("%s: got %v, want malformed JSON body: %v", body, err, want)
		}
	}
	if _, err := ParseRequest([]byte(`{"gid":"g","trans_type":"flow"}`)); err == nil || !strings.Contains(err.Error(), `unsupported trans_type "flow"`) {
		t.Errorf("trans_type flow: got %v", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, c := range decodeCases {
		f.Add(c.body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var fast dtx.Request
		if !decodeRequest([]byte(body), &fast) {
			return
		}
		var ref dtx.Request
		if err := json.Unmarshal([]byte(body), &ref); err != nil {
			t.Fatalf("%q: fast decoder took a body encoding/json refuses: %v", body, err)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("%q:\nfast %#v\njson %#v", body, fast, ref)
		}
	})
}

func BenchmarkParseRequest(b *testing.B) {
	body := []byte(dtmcliSaga)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// A submit with "payloads":[] and a step without data crashed the
// coordinator (index out of range: the empty slice was taken for dtm's old
// steps[].data format). It must be an ordinary request, or a 400-style
// error, never a panic.
func TestParseRequestEmptyPayloadsNoPanic(t *testing.T) {
	for _, body := range []string{
		`{"gid":"p1","trans_type":"saga","steps":[{"action":""}],"payloads":[]}`,
		`{"gid":"p2","trans_type":"msg","steps":[{"action":"http://127.0.0.1:1/a"},{"action":""}],"payloads":[]}`,
		`{"gid":"p3","trans_type":"saga","steps":[{"action":"","data":"x"}],"payloads":[]}`,
	} {
		r, err := ParseRequest([]byte(body))
		if err != nil {
			continue
		}
		if len(r.Payloads) != 0 && len(r.Payloads) != len(r.Steps) {
			t.Errorf("%s: %d payloads for %d steps", body, len(r.Payloads), len(r.Steps))
		}
	}
}
