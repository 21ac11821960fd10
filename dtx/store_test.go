package dtx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// TestApplyBatchOutcomes: in one group-committed batch each mutation applies
// whole or, when its precondition fails, not at all, independently of the others.
func TestApplyBatchOutcomes(t *testing.T) {
	eachStore(t, func(t *testing.T, st dtx.Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		mk := func(gid, status, owner string) *dtx.Global {
			return &dtx.Global{Gid: gid, TransType: dtx.TypeSaga, Status: status, Owner: owner, CreateTime: now, UpdateTime: now,
				Steps: []map[string]string{{"action": "http://a/x", "compensate": "http://a/y"}}, Payloads: []string{"{}"}}
		}
		var muts []*dtx.Mutation
		for _, gid := range []string{"b1", "b2", "b3"} {
			g := mk(gid, dtx.StatusSubmitted, "o1")
			muts = append(muts, &dtx.Mutation{Gid: gid, Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
		}
		if errs, err := st.Apply(ctx, muts); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
			t.Fatal(err, errs)
		}
		done := mk("b1", dtx.StatusSucceed, "o1")
		done.BranchStatus = map[string]dtx.BranchState{dtx.BranchKey("01", dtx.OpAction): {Status: dtx.StatusSucceed, FinishTime: now}}
		batch := []*dtx.Mutation{
			{Gid: "b1", Global: done, BranchUpdates: []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusSucceed, FinishTime: now}},
				IfStatus: []string{dtx.StatusSubmitted}, IfOwner: "o1"},
			{Gid: "b2", Global: mk("b2", dtx.StatusAborting, "o1"), IfStatus: []string{dtx.StatusPrepared}},
			{Gid: "b3", Global: mk("b3", dtx.StatusAborting, "o2"), IfOwner: "someone else"},
			{Gid: "b4", Global: mk("b4", dtx.StatusAborting, "o1")},
		}
		errs, err := st.Apply(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		var ce *dtx.ConflictError
		if errs[0] != nil {
			t.Errorf("passing update: %v", errs[0])
		}
		if !errors.As(errs[1], &ce) || ce.LostLease || ce.Status != dtx.StatusSubmitted {
			t.Errorf("wrong status: %v", errs[1])
		}
		if !errors.As(errs[2], &ce) || !ce.LostLease {
			t.Errorf("wrong owner: %v", errs[2])
		}
		if !errors.Is(errs[3], dtx.ErrNotFound) {
			t.Errorf("missing: %v", errs[3])
		}
		// A create of an existing gid, batched with a new one.
		errs, err = st.Apply(ctx, []*dtx.Mutation{{Gid: "b1", Create: true, Global: mk("b1", dtx.StatusSubmitted, "")}, {Gid: "b5", Create: true, Global: mk("b5", dtx.StatusSubmitted, "")}})
		if err != nil || !errors.Is(errs[0], dtx.ErrExists) || errs[1] != nil {
			t.Errorf("creates: %v %v", errs, err)
		}
		g, bs, err := st.Get(ctx, "b1")
		if err != nil || g.Status != dtx.StatusSucceed || len(bs) != 2 || bs[1].Op != dtx.OpAction || bs[1].Status != dtx.StatusSucceed || bs[0].Status != dtx.StatusPrepared {
			t.Errorf("b1 after the batch: %+v %+v %v", g, bs, err)
		}
		for _, gid := range []string{"b2", "b3"} {
			if g, _, _ := st.Get(ctx, gid); g.Status != dtx.StatusSubmitted || g.Owner != "o1" {
				t.Errorf("%s changed by a failed mutation: %+v", gid, g)
			}
		}
	})
}
