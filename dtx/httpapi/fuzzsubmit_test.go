package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/dtm-labs/dtm/client/dtmgrpc/dtmgpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/grpcapi"
	"github.com/sluice-db/sluice/dtx/httpapi"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// FuzzSubmit feeds request shapes of every transaction type (saga, tcc,
// msg, xa, workflow) and every call (submit, prepare, abort, the
// registerBranch routes, prepareWorkflow, query, forceStop...) to every
// transport of one coordinator: the lean HTTP loop, net/http, JSON-RPC and
// gRPC (dtm's generated messages, and the fuzzed bytes as a raw protobuf
// message). Seed bodies name the test's business service as BUSI (its HTTP
// base) and GBUSI (its gRPC address), so that valid seeds run real
// branches. For every input:
//   - no handler panics (a recovered panic is logged; the log is watched),
//     and the process survives (the fuzzing engine reports an exit);
//   - every HTTP answer is a 2xx with a JSON body or a 4xx; a 5xx is a
//     finding (memstore has no store errors to excuse one); a gRPC answer
//     is OK or a status that names the caller's mistake or dtm's outcomes,
//     never Internal or Unknown;
//   - every answer comes within 20 s (no handler hangs);
//   - the coordinator still answers a good request afterwards;
//   - goroutines stay bounded (a leak of one per request shows within a
//     few thousand executions).
func FuzzSubmit(f *testing.F) {
	// The seeds are testdata/fuzz/FuzzSubmit: a call of each kind for
	// each transaction type, in an order that makes the valid ones
	// succeed (prepare, register, submit), and a few malformed ones.
	f.Fuzz(func(t *testing.T, route string, body []byte) {
		fx := fuzzFixture(t)
		body = bytes.ReplaceAll(body, []byte("GBUSI"), []byte(fx.grpcBusi))
		body = bytes.ReplaceAll(body, []byte("BUSI"), []byte(fx.busi))
		route = pickRoute(route)
		fx.lean(t, route, body)
		fx.netHTTP(t, route, body)
		fx.jsonRPC(t, route, body)
		fx.grpc(t, route, body)
		if p := fx.panics.Load(); p != 0 {
			t.Fatalf("%d handler panics (see the log above) for %s %q", p, route, body)
		}
		fx.good(t)
		if n := runtime.NumGoroutine(); n > 5000 {
			t.Fatalf("%d goroutines after %s %q: a leak", n, route, body)
		}
	})
}

// fuzzRoutes are the routes a fuzz input's route string picks from.
var fuzzRoutes = []string{"submit", "prepare", "abort", "registerBranch", "registerTccBranch", "registerXaBranch",
	"prepareWorkflow", "query", "newGid", "forceStop", "resetNextCronTime", "subscribe", "all"}

// pickRoute maps any string onto a route, so that mutating it still
// exercises one.
func pickRoute(s string) string {
	for _, r := range fuzzRoutes {
		if s == r {
			return r
		}
	}
	return fuzzRoutes[len(s)%len(fuzzRoutes)]
}

// fixture is one coordinator served on every transport, with a business
// service for its branches; one per fuzzing process.
type fixture struct {
	busi, grpcBusi   string
	leanAddr, netURL string
	gconn            *grpc.ClientConn
	client           *http.Client
	panics           atomic.Int64
	seq              atomic.Int64
}

var (
	fxOnce sync.Once
	fx     *fixture
	fxErr  error
)

// panicWatch counts the error records the recover paths log.
type panicWatch struct {
	slog.Handler
	fx *fixture
}

func (p panicWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		p.fx.panics.Add(1)
		return p.Handler.Handle(ctx, r)
	}
	return nil // the coordinator's own retries and warnings are expected here
}

func (p panicWatch) WithAttrs(a []slog.Attr) slog.Handler {
	return panicWatch{p.Handler.WithAttrs(a), p.fx}
}

func (p panicWatch) WithGroup(n string) slog.Handler { return panicWatch{p.Handler.WithGroup(n), p.fx} }

// fuzzFixture starts the fixture once per process. It is never stopped:
// the fuzzing worker is a process of its own, and the fixture lives as
// long as it.
func fuzzFixture(t *testing.T) *fixture {
	fxOnce.Do(func() { fx, fxErr = startFixture() })
	if fxErr != nil {
		t.Fatal(fxErr)
	}
	return fx
}

func startFixture() (*fixture, error) {
	f := &fixture{client: &http.Client{Timeout: 20 * time.Second}}
	busi, err := dtxtest.Start(nil, dtxtest.Config{NoDB: true})
	if err != nil {
		return nil, err
	}
	f.busi = busi.URL
	if f.grpcBusi, err = busi.ServeGRPC(); err != nil {
		return nil, err
	}
	cfg := dtxtest.FastConfig()
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.Lease = time.Second
	log := slog.New(panicWatch{slog.NewTextHandler(&lockedStderr{}, nil), f})
	c, err := dtx.New(cfg, memstore.New(), nil, log)
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	h := httpapi.Handler(c, nil)
	lln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lean := httpapi.NewServer(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, h)
	go lean.Serve(lln) //nolint:errcheck // lives as long as the process
	f.leanAddr = lln.Addr().String()
	nln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(nln) //nolint:errcheck // as above
	f.netURL = "http://" + nln.Addr().String()
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gs := grpcapi.New(c)
	go gs.Serve(gln) //nolint:errcheck // as above
	f.gconn, err = grpc.NewClient(gln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	return f, err
}

type lockedStderr struct{ mu sync.Mutex }

func (l *lockedStderr) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Printf("%s", b)
}

// httpTarget is the method and path (with query) of route for body.
func httpTarget(route string, body []byte) (method, target string, hasBody bool) {
	switch route {
	case "query":
		return http.MethodGet, "/api/dtmsvr/query?gid=" + url.QueryEscape(string(body)), false
	case "subscribe", "all":
		return http.MethodGet, "/api/dtmsvr/" + route + "?" + sanitizeQuery(body), false
	case "newGid":
		return http.MethodGet, "/api/dtmsvr/newGid", false
	}
	return http.MethodPost, "/api/dtmsvr/" + route, true
}

// sanitizeQuery keeps a fuzzed query on the request line (no spaces or
// control bytes, which would only test the HTTP parser).
func sanitizeQuery(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		if c > ' ' && c < 0x7f && c != '#' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// checkHTTP holds an HTTP answer to the invariants.
func checkHTTP(t *testing.T, via, route string, body []byte, code int, ans []byte) {
	t.Helper()
	t.Logf("%s %s: HTTP %d %.200s", via, route, code, ans)
	switch {
	case code >= 500:
		t.Fatalf("%s %s %q: HTTP %d %s", via, route, body, code, ans)
	case code >= 200 && code < 300:
		if !json.Valid(ans) {
			t.Fatalf("%s %s %q: HTTP %d with a body that is not JSON: %q", via, route, body, code, ans)
		}
	case code < 400:
		t.Fatalf("%s %s %q: HTTP %d", via, route, body, code)
	}
}

// lean sends the request as dtm's client does, on a raw connection to the
// lean server (which takes it, or hands it to net/http when it is not plain).
func (f *fixture) lean(t *testing.T, route string, body []byte) {
	method, target, hasBody := httpTarget(route, body)
	c, err := net.DialTimeout("tcp", f.leanAddr, 5*time.Second)
	if err != nil {
		t.Fatalf("lean: dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, target)
	if hasBody {
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		req.Write(body)
	} else {
		req.WriteString("\r\n")
	}
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatalf("lean: write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("lean %s %q: no answer: %v", route, body, err)
	}
	ans, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("lean %s %q: answer cut: %v", route, body, err)
	}
	checkHTTP(t, "lean", route, body, resp.StatusCode, ans)
}

// netHTTP sends it through net/http's client to the net/http server.
func (f *fixture) netHTTP(t *testing.T, route string, body []byte) {
	method, target, hasBody := httpTarget(route, body)
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, f.netURL+target, rd)
	if err != nil {
		return // not a request net/http's client can send
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("net/http %s %q: %v", route, body, err)
	}
	ans, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("net/http %s %q: answer cut: %v", route, body, err)
	}
	checkHTTP(t, "net/http", route, body, resp.StatusCode, ans)
}

// jsonRPC sends the body as the params of dtm's JSON-RPC method, verbatim
// (a malformed body makes the whole call malformed, which is a case too).
func (f *fixture) jsonRPC(t *testing.T, route string, body []byte) {
	method := route
	if strings.HasPrefix(route, "register") {
		method = "registerBranch"
	}
	params := body
	if len(bytes.TrimSpace(params)) == 0 {
		params = []byte("null")
	}
	call := []byte(`{"jsonrpc":"2.0","id":"1","method":` + strconvQuote(method) + `,"params":`)
	call = append(append(call, params...), '}')
	resp, err := f.client.Post(f.netURL+"/api/json-rpc", "application/json", bytes.NewReader(call))
	if err != nil {
		t.Fatalf("json-rpc %s %q: %v", route, body, err)
	}
	ans, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("json-rpc %s %q: answer cut: %v", route, body, err)
	}
	if resp.StatusCode != http.StatusOK || !json.Valid(ans) {
		t.Fatalf("json-rpc %s %q: HTTP %d %q (dtm answers 200 with a JSON body)", route, body, resp.StatusCode, ans)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// grpcMethods maps routes onto dtm's gRPC methods.
var grpcMethods = map[string]string{
	"submit": "Submit", "prepare": "Prepare", "abort": "Abort", "prepareWorkflow": "PrepareWorkflow",
	"registerBranch": "RegisterBranch", "registerTccBranch": "RegisterBranch", "registerXaBranch": "RegisterBranch",
	"newGid": "NewGid", "subscribe": "Subscribe",
}

// grpc sends the body as the raw protobuf message of the route's method,
// and (when it is JSON in dtm's HTTP shape) as dtm's gRPC message for it.
func (f *fixture) grpc(t *testing.T, route string, body []byte) {
	m, ok := grpcMethods[route]
	if !ok {
		m = "Submit"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []byte
	err := f.gconn.Invoke(ctx, "/dtmgimp.Dtm/"+m, body, &out, grpc.ForceCodec(rawCodec{}))
	checkGRPC(t, "raw "+m, body, err)
	msg := dtmMessage(route, body)
	if msg == nil {
		return
	}
	raw, err := proto.Marshal(msg)
	if err != nil {
		return
	}
	err = f.gconn.Invoke(ctx, "/dtmgimp.Dtm/"+m, raw, &out, grpc.ForceCodec(rawCodec{}))
	checkGRPC(t, m, body, err)
}

func checkGRPC(t *testing.T, via string, body []byte, err error) {
	t.Helper()
	if st, _ := status.FromError(err); st.Code() == codes.Internal && strings.HasPrefix(st.Message(), "grpc: failed to unmarshal the received message") {
		return // grpc-go's own answer to bytes that are not the method's message (the gRPC spec's INTERNAL)
	}
	switch status.Code(err) {
	case codes.Internal, codes.Unknown, codes.Unavailable, codes.DeadlineExceeded, codes.DataLoss:
		t.Fatalf("gRPC %s %q: %v", via, body, err)
	}
}

// dtmMessage converts an HTTP-shaped body into dtm's gRPC message for the
// route, as dtm's gRPC client would have sent the same call; nil when the
// body is not a JSON object.
func dtmMessage(route string, body []byte) proto.Message {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	if strings.HasPrefix(route, "register") {
		data := map[string]string{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				data[k] = s
			}
		}
		return &pb.DtmBranchRequest{Gid: str("gid"), TransType: str("trans_type"), BranchID: str("branch_id"),
			Op: str("op"), Data: data, BusiPayload: []byte(str("data"))}
	}
	if route == "subscribe" {
		return &pb.DtmTopicRequest{Topic: str("topic"), URL: str("url"), Remark: str("remark")}
	}
	req := &pb.DtmRequest{Gid: str("gid"), TransType: str("trans_type"), CustomedData: str("custom_data"),
		QueryPrepared: str("query_prepared"), RollbackReason: str("rollback_reason"), TransOptions: &pb.DtmTransOptions{}}
	if s, ok := m["steps"]; ok {
		b, _ := json.Marshal(s)
		req.Steps = string(b)
	}
	if ps, ok := m["payloads"].([]any); ok {
		for _, p := range ps {
			s, _ := p.(string)
			req.BinPayloads = append(req.BinPayloads, []byte(s))
		}
	}
	num := func(k string) int64 { n, _ := m[k].(float64); return int64(n) }
	req.TransOptions.WaitResult, _ = m["wait_result"].(bool)
	req.TransOptions.TimeoutToFail, req.TransOptions.RetryInterval = num("timeout_to_fail"), num("retry_interval")
	req.TransOptions.RequestTimeout, req.TransOptions.RetryLimit = num("request_timeout"), num("retry_limit")
	if re, ok := m["req_extra"].(map[string]any); ok {
		req.ReqExtra = map[string]string{}
		for k, v := range re {
			req.ReqExtra[k], _ = v.(string)
		}
	}
	return req
}

// rawCodec passes messages as their bytes (the fuzzed body is the message).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// good checks that the coordinator still serves a plain saga, on the lean
// loop, after the input.
func (f *fixture) good(t *testing.T) {
	gid := fmt.Sprintf("fz-good-%d-%d", time.Now().UnixNano(), f.seq.Add(1))
	body := []byte(`{"gid":"` + gid + `","trans_type":"saga","steps":[{"action":"` + f.busi + `/TransIn","compensate":"` +
		f.busi + `/TransInCompensate"}],"payloads":["{}"]}`)
	c, err := net.DialTimeout("tcp", f.leanAddr, 5*time.Second)
	if err != nil {
		t.Fatalf("good request: dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "POST /api/dtmsvr/submit HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("good request: no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("good request: HTTP %d", resp.StatusCode)
	}
}
