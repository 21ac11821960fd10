package boltstore

import (
	"fmt"
	"maps"
	"unsafe"

	"github.com/sluice-db/sluice/dtx"
)

// record is one applied mutation as the log keeps it: the transaction's
// new row and its branches, as puts, so that replaying any suffix of the
// log again yields the same state. To keep the log (and the CPU spent
// encoding it) small, a record leaves out what the mutation did not
// change: the body of the row (steps, payloads, options: fixed at
// creation) and, when branches only changed status, the branch list.
type record struct {
	G *dtx.Global `json:"g"`
	// Body: G's body fields were left out; they are the previous state's.
	Body bool `json:"k,omitempty"`
	// B is the whole branch list, when branches were added.
	B []dtx.Branch `json:"b,omitempty"`
	// U are status changes of existing branches, when none were added.
	U []dtx.BranchUpdate `json:"u,omitempty"`
}

// delta is the record of m, which turned cur into st.
func delta(cur, st *state, m *dtx.Mutation) *record {
	r := &record{G: st.g}
	if cur.g != nil && sameBody(cur.g, st.g) {
		g := *st.g
		g.Steps, g.Payloads, g.CustomData, g.QueryPrepared, g.Options = nil, nil, "", "", dtx.Options{}
		r.G, r.Body = &g, true
	}
	if len(st.bs) != len(cur.bs) || cur.g == nil {
		r.B = st.bs
	} else {
		r.U = m.BranchUpdates
	}
	return r
}

// sameBody tells whether b kept a's body. Steps and payloads are compared
// by identity: the coordinator's copies of a row share them, and a false
// "changed" only costs a bigger record.
func sameBody(a, b *dtx.Global) bool {
	return len(a.Steps) == len(b.Steps) && unsafe.SliceData(a.Steps) == unsafe.SliceData(b.Steps) &&
		len(a.Payloads) == len(b.Payloads) && unsafe.SliceData(a.Payloads) == unsafe.SliceData(b.Payloads) &&
		a.CustomData == b.CustomData && a.QueryPrepared == b.QueryPrepared &&
		sameOptions(&a.Options, &b.Options)
}

// sameOptions is reflect.DeepEqual of two Options without its allocations
// (it ran for every update); TestSameOptions keeps it in step with the
// type's fields.
func sameOptions(a, b *dtx.Options) bool {
	return a.WaitResult == b.WaitResult && a.TimeoutToFail == b.TimeoutToFail &&
		a.RequestTimeout == b.RequestTimeout && a.RetryInterval == b.RetryInterval &&
		a.Concurrent == b.Concurrent && a.RetryLimit == b.RetryLimit && a.RetryCount == b.RetryCount &&
		maps.Equal(a.BranchHeaders, b.BranchHeaders)
}

// apply replays the record on base, the state before it.
func (r *record) apply(base *state) (*state, error) {
	st := &state{g: r.G, bs: base.bs}
	if r.Body {
		if base.g == nil {
			return nil, fmt.Errorf("log record for %s has no earlier state", r.G.Gid)
		}
		st.g.Steps, st.g.Payloads, st.g.CustomData = base.g.Steps, base.g.Payloads, base.g.CustomData
		st.g.QueryPrepared, st.g.Options = base.g.QueryPrepared, base.g.Options
	}
	if r.B != nil {
		st.bs = r.B
		return st, nil
	}
	if len(r.U) > 0 {
		st.bs = append([]dtx.Branch(nil), base.bs...)
		for _, u := range r.U {
			for j := range st.bs {
				if st.bs[j].BranchID == u.BranchID && st.bs[j].Op == u.Op {
					st.bs[j].Status, st.bs[j].FinishTime = u.Status, u.FinishTime
				}
			}
		}
	}
	return st, nil
}
