package httpapi

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseLean checks the hand-written request parser against net/http's:
// whenever the lean loop would take a request, net/http must read the same
// bytes as the same request (method and path of the route, Content-Length,
// Connection: close, where the body starts), and parseLean must consume
// nothing. A request the lean loop declines goes to net/http whole, so
// declining is always safe; taking one net/http would read otherwise is
// the bug this looks for.
func FuzzParseLean(f *testing.F) {
	for _, s := range []string{
		"POST /api/dtmsvr/submit HTTP/1.1\r\nHost: 127.0.0.1:36789\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"GET /api/dtmsvr/newGid HTTP/1.1\r\nHost: h\r\nUser-Agent: go-resty\r\n\r\n",
		"POST /api/dtmsvr/registerBranch HTTP/1.1\r\nHost: h\r\nContent-Length:  5 \r\nConnection: keep-alive\r\n\r\nhello",
		"POST /api/dtmsvr/abort HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"POST /api/dtmsvr/submit HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /api/dtmsvr/submit HTTP/1.1\r\nHost: h\r\n Content-Length: 2\r\n\r\n{}",
		"POST /api/dtmsvr/submit HTTP/1.1\r\nhost: a b\r\nContent-Length: 2\r\n\r\n{}",
		"POST /api/dtmsvr/submit HTTP/1.1\r\nHost: h\r\nContent-Length: +2\r\n\r\n{}",
	} {
		f.Add([]byte(s))
	}
	routes := map[int]string{routeSubmit: "POST /api/dtmsvr/submit", routePrepare: "POST /api/dtmsvr/prepare",
		routeAbort: "POST /api/dtmsvr/abort", routeRegisterBranch: "POST /api/dtmsvr/register", routeNewGid: "GET /api/dtmsvr/newGid"}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		req, ok, _ := parseLean(br)
		if !ok {
			return
		}
		if br.Buffered() != len(data) && br.Buffered() != br.Size() {
			// Peek only: everything read is still buffered.
			t.Fatalf("parseLean consumed input: %d of %d bytes buffered", br.Buffered(), len(data))
		}
		std := bufio.NewReader(bytes.NewReader(data))
		hr, err := http.ReadRequest(std)
		if err != nil {
			t.Fatalf("lean takes %q; net/http refuses it: %v", data, err)
		}
		if got := hr.Method + " " + hr.URL.Path; !strings.HasPrefix(got, routes[req.route]) || hr.URL.RawQuery != "" {
			t.Fatalf("lean route %d, net/http %s ?%s", req.route, got, hr.URL.RawQuery)
		}
		if hr.ContentLength != int64(req.contentLength) {
			t.Fatalf("lean Content-Length %d, net/http %d", req.contentLength, hr.ContentLength)
		}
		if hr.Close != req.close {
			t.Fatalf("lean close %v, net/http %v", req.close, hr.Close)
		}
		if consumed := len(data) - std.Buffered(); consumed != req.headerLen && std.Buffered() != 0 {
			t.Fatalf("lean header ends at %d, net/http read %d", req.headerLen, consumed)
		}
	})
}
