package dtx

import (
	"net/url"
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
