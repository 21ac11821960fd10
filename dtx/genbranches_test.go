package dtx

import (
	"strings"
	"testing"
	"unsafe"
)

// TestGenBranchesSharePayload: a saga's branches carry its payload without
// a copy (issue 30: a flood of 1 MB submits held every payload twice, as
// the row's string and as the branches' bytes), and an empty payload is
// an empty body, not a missing one.
func TestGenBranchesSharePayload(t *testing.T) {
	pay := strings.Repeat("p", 1<<20)
	g := &Global{Gid: "g", TransType: TypeSaga, Steps: []map[string]string{{OpAction: "http://a/x", OpCompensate: "http://a/y"}, {OpAction: "http://a/z"}}, Payloads: []string{pay, ""}}
	bs := GenBranches(g)
	if len(bs) != 4 {
		t.Fatalf("%d branches", len(bs))
	}
	for _, b := range bs[:2] {
		if string(b.BinData) != pay || unsafe.SliceData(b.BinData) != unsafe.StringData(pay) {
			t.Fatalf("branch %s %s: its body is a copy of the payload", b.BranchID, b.Op)
		}
	}
	for _, b := range bs[2:] {
		if b.BinData == nil || len(b.BinData) != 0 {
			t.Fatalf("branch %s %s: body %v, want empty", b.BranchID, b.Op, b.BinData)
		}
	}
}
