package wire

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Transport is the Caller for dtm's protocols: plain HTTP, JSON-RPC over
// HTTP, and gRPC.
type Transport struct {
	http   *branchClient
	grpc   *grpcConns
	reach  *reachability
	policy *HostPolicy
}

// Options switches the hand-written HTTP I/O off.
type Options struct {
	// NetHTTP sends every HTTP branch call through net/http's Transport,
	// not only https ones.
	NetHTTP bool
	// NoRawSyscalls reads and writes the hand-written client's
	// connections through net.Conn (see internal/rawconn).
	NoRawSyscalls bool
}

// New returns a Transport with no connections yet. Every connection it
// makes (branch calls over HTTP, HTTPS and gRPC, the reachability probe)
// goes through policy's dialer; nil is the default policy.
func New(policy *HostPolicy, opts Options) *Transport {
	if policy == nil {
		policy = &HostPolicy{}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	tr.Proxy = nil // a proxy would dial for us, past the policy
	tr.DialContext = policy.dialer(30 * time.Second)
	bc := newBranchClient(&http.Client{Transport: tr}, 512)
	bc.dial = policy.DialContext
	bc.netHTTP, bc.noRaw = opts.NetHTTP, opts.NoRawSyscalls
	return &Transport{
		http:   bc,
		grpc:   newGRPCConns(policy),
		reach:  newReachability(policy),
		policy: policy,
	}
}

// Close drops idle connections; calls in flight finish on theirs.
func (t *Transport) Close() {
	t.http.close()
	t.grpc.close()
}

// isHTTP tells dtm's rule: a transaction's branches are called over HTTP
// when it says so, or when the URL is an http(s) URL whatever it says.
func isHTTP(u, protocol string) bool {
	return protocol == "" || protocol == HTTP || strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

// Call implements Caller.
func (t *Transport) Call(ctx context.Context, c *Call) (Answer, error) {
	switch {
	case !isHTTP(c.URL, c.Protocol):
		return t.callGRPC(ctx, c)
	case c.Protocol == JSONRPC && strings.Contains(c.URL, "method"):
		return t.callJSONRPC(ctx, c)
	}
	return t.callHTTP(ctx, c)
}

// callHTTP makes a branch request the way dtm does: GET, or POST with a
// payload and for every XA branch; dtm's four parameters in the query.
func (t *Transport) callHTTP(ctx context.Context, c *Call) (Answer, error) {
	base, err := branchURLs.get(c.URL)
	if err != nil {
		return Answer{}, err
	}
	u := *base
	u.RawQuery = branchQuery(base.RawQuery, c.Gid, c.TransType, c.BranchID, c.Op)
	method := http.MethodGet
	if len(c.Body) > 0 || c.TransType == "xa" {
		method = http.MethodPost
	}
	a, err := t.http.do(ctx, method, &u, c.Body, c.Headers, c.Timeout)
	if err != nil {
		return Answer{}, err
	}
	return classifyHTTP(a.status, string(a.body))
}

// classifyHTTP reads an HTTP answer as dtm does (dtmcli.HTTPResp2DtmError):
// 425 or ONGOING in the body, 409 or FAILURE in the body, 200.
func classifyHTTP(status int, s string) (Answer, error) {
	switch {
	case status == http.StatusTooEarly || strings.Contains(s, Ongoing):
		return Answer{Outcome: Ongoing}, nil
	case status == http.StatusConflict || strings.Contains(s, Failure):
		// The body is the business's reason ({"message":"Insufficient
		// balance"}); dtm keeps it in the rollback reason.
		return Answer{Outcome: Failure, Message: OneLine(s, 1000)}, nil
	case status != http.StatusOK:
		return Answer{}, fmt.Errorf("HTTP %d: %s", status, strings.TrimSpace(OneLine(s, 200)))
	}
	return Answer{Outcome: Success}, nil
}

// branchQuery adds dtm's four query parameters to a branch URL's query.
func branchQuery(raw, gid, transType, branchID, op string) string {
	if raw == "" {
		// What url.Values.Encode makes of the four keys, in its (sorted)
		// order, without building the map.
		return "branch_id=" + url.QueryEscape(branchID) + "&gid=" + url.QueryEscape(gid) +
			"&op=" + url.QueryEscape(op) + "&trans_type=" + url.QueryEscape(transType)
	}
	q, _ := url.ParseQuery(raw)
	q.Set("gid", gid)
	q.Set("trans_type", transType)
	q.Set("branch_id", branchID)
	q.Set("op", op)
	return q.Encode()
}

// OneLine folds s onto one line of at most max bytes.
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// CheckURL refuses a branch URL that the protocol cannot call: HTTP wants
// an absolute http or https URL with a host, gRPC dtm's host:port/service/
// method. Accepted HTTP URLs are kept parsed for the calls.
func CheckURL(s, protocol string) error {
	if s == "" {
		return fmt.Errorf("empty URL")
	}
	if !isHTTP(s, protocol) {
		_, _, err := splitGRPC(s)
		return err
	}
	u, cached := branchURLs.lookup(s)
	if !cached {
		var err error
		if u, err = url.Parse(s); err != nil {
			return fmt.Errorf("bad URL %q: %v", s, err)
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q: only http and https branches are supported", s)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", s)
	}
	if !cached {
		branchURLs.add(s, u)
	}
	return nil
}

// splitGRPC splits a gRPC branch URL into its server and its full method
// name, as dtm's default driver does.
func splitGRPC(s string) (server, method string, err error) {
	i := strings.IndexByte(s, '/')
	switch {
	case strings.Contains(s, "://"):
		return "", "", fmt.Errorf("gRPC URL %q: want host:port/package.Service/Method (dtm's drivers for other schemes are not supported)", s)
	case i <= 0 || i == len(s)-1:
		return "", "", fmt.Errorf("gRPC URL %q: want host:port/package.Service/Method", s)
	}
	return s[:i], s[i:], nil
}

// Check implements Caller.
func (t *Transport) Check(ctx context.Context, s, protocol string, probe bool) error {
	if err := CheckURL(s, protocol); err != nil {
		return err
	}
	host, err := urlHostPort(s, protocol)
	if err != nil {
		return err
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		if err := t.policy.AllowHost(h); err != nil {
			return fmt.Errorf("branch URL %s: %v", s, err)
		}
	}
	if !probe {
		return nil
	}
	if err := t.reach.check(ctx, host); err != nil {
		return fmt.Errorf("branch URL %s is unreachable: %v", s, err)
	}
	return nil
}

// urlHostPort is the host:port a branch URL connects to.
func urlHostPort(s, protocol string) (string, error) {
	var host string
	if isHTTP(s, protocol) {
		u, err := branchURLs.get(s)
		if err != nil {
			return "", err
		}
		host = u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
	} else {
		host, _, _ = splitGRPC(s)
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, "443") // gRPC's default port
		}
	}
	return host, nil
}
