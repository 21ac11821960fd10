package wire

import (
	"net/url"
	"strconv"
	"testing"
)

// The query built without a map must be byte for byte what url.Values
// makes, which is what dtm's branches have always been sent.
func TestBranchQueryMatchesValuesEncode(t *testing.T) {
	for _, c := range [][4]string{
		{"g1", "saga", "01", "action"},
		{"a b&c=d/é", "tcc", "01 02", "cancel?x"},
		{"", "", "", ""},
	} {
		want := url.Values{"gid": {c[0]}, "trans_type": {c[1]}, "branch_id": {c[2]}, "op": {c[3]}}.Encode()
		if got := branchQuery("", c[0], c[1], c[2], c[3]); got != want {
			t.Errorf("%q: got %q, want %q", c, got, want)
		}
	}
	// A URL's own query is kept, and dtm's keys replace same-named ones.
	got := branchQuery("uid=7&gid=old", "g1", "saga", "01", "action")
	if want := "branch_id=01&gid=g1&op=action&trans_type=saga&uid=7"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParsedURLsBounded(t *testing.T) {
	var c parsedURLs
	for i := 0; i < maxParsedURLs+10; i++ {
		u, err := c.get("http://h/p" + string(rune('a'+i%26)) + url.PathEscape(string(rune(i))))
		if err != nil || u.Host != "h" {
			t.Fatalf("get: %v %v", u, err)
		}
	}
	if len(c.m) > maxParsedURLs {
		t.Fatalf("cache holds %d URLs, bound %d", len(c.m), maxParsedURLs)
	}
	if _, err := c.get("http://[::1"); err == nil {
		t.Fatal("a bad URL parsed")
	}
}

// TestCheckURLCache: a URL is parsed once, errors are the same each time,
// and the cache stays within its bound.
func TestCheckURLCache(t *testing.T) {
	for _, bad := range []string{"", "ftp://h/x", "http:///x", "http://[::1", "topic-less"} {
		first, second := CheckURL(bad, HTTP), CheckURL(bad, HTTP)
		if first == nil || second == nil || first.Error() != second.Error() {
			t.Errorf("%q: %v, then %v", bad, first, second)
		}
		if branchURLs.has(bad) {
			t.Errorf("%q: refused but cached", bad)
		}
	}
	if err := CheckURL("http://127.0.0.1:8081/api/busi/TransOut", HTTP); err != nil || !branchURLs.has("http://127.0.0.1:8081/api/busi/TransOut") {
		t.Fatalf("good URL: %v, cached %v", err, branchURLs.has("http://127.0.0.1:8081/api/busi/TransOut"))
	}
	c := parsedURLs{max: 8}
	for i := 0; i < 20; i++ {
		c.add("http://h/"+strconv.Itoa(i), &url.URL{})
		if len(c.m) > c.max {
			t.Fatalf("cache holds %d, bound %d", len(c.m), c.max)
		}
	}
	if !c.has("http://h/19") {
		t.Error("the latest URL is not cached")
	}
}

// TestCheckGRPCURL: gRPC branches are dtm's host:port/package.Service/Method;
// an http URL in a gRPC transaction is still called over HTTP, as in dtm.
func TestCheckGRPCURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"localhost:58081/busi.Busi/TransIn": true,
		"http://127.0.0.1:8081/api/x":       true,
		"localhost:58081":                   false,
		"/busi.Busi/TransIn":                false,
		"localhost:58081/":                  false,
		"etcd://x/busi.Busi/TransIn":        false,
		"":                                  false,
	} {
		if err := CheckURL(u, GRPC); (err == nil) != ok {
			t.Errorf("%q: %v", u, err)
		}
	}
	if s, m, err := splitGRPC("localhost:58081/busi.Busi/TransIn"); err != nil || s != "localhost:58081" || m != "/busi.Busi/TransIn" {
		t.Errorf("split: %q %q %v", s, m, err)
	}
}
