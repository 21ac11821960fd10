package dtx_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestApplyBatchOutcomes: in one group-committed batch each mutation applies
// whole or, when its precondition fails, not at all, independently of the others.
func TestApplyBatchOutcomes(t *testing.T) {
	sandboxtest.SkipShort(t)
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

// TestKVContract: every store keeps dtm's key-value entries (topics) the
// same way: a create of an existing key and a write over a stale version
// fail and change nothing, versions count writes, lists page in key order
// within a category, and a delete of a missing key says so.
func TestKVContract(t *testing.T) {
	sandboxtest.SkipShort(t)
	eachStore(t, func(t *testing.T, st dtx.Store) {
		kvs, ok := st.(dtx.KVStore)
		if !ok {
			t.Fatalf("%T keeps no key-value entries", st)
		}
		ctx := context.Background()
		if _, err := kvs.KVGet(ctx, "topics", "a"); !errors.Is(err, dtx.ErrNotFound) {
			t.Fatalf("get of a missing key: %v", err)
		}
		for _, k := range []string{"b", "a", "c"} {
			if err := kvs.KVPut(ctx, &dtx.KV{Cat: "topics", K: k, V: "v-" + k}, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := kvs.KVPut(ctx, &dtx.KV{Cat: "other", K: "a", V: "x"}, 0); err != nil {
			t.Fatal(err)
		}
		if err := kvs.KVPut(ctx, &dtx.KV{Cat: "topics", K: "a", V: "again"}, 0); !errors.Is(err, dtx.ErrExists) {
			t.Fatalf("second create: %v", err)
		}
		a, err := kvs.KVGet(ctx, "topics", "a")
		if err != nil || a.V != "v-a" || a.Version != 1 || a.CreateTime == nil {
			t.Fatalf("get a: %+v %v", a, err)
		}
		a.V = "w"
		if err := kvs.KVPut(ctx, a, 1); err != nil || a.Version != 2 {
			t.Fatalf("update at version 1: %v (version %d)", err, a.Version)
		}
		stale := &dtx.KV{Cat: "topics", K: "a", V: "stale"}
		if err := kvs.KVPut(ctx, stale, 1); !errors.Is(err, dtx.ErrConflict) {
			t.Fatalf("update at a stale version: %v", err)
		}
		if a, err := kvs.KVGet(ctx, "topics", "a"); err != nil || a.V != "w" || a.Version != 2 {
			t.Fatalf("after the stale update: %+v %v", a, err)
		}
		var keys []string
		for after := ""; ; {
			page, err := kvs.KVList(ctx, "topics", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range page {
				keys = append(keys, kv.Cat+"/"+kv.K)
			}
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].K
		}
		if got := strings.Join(keys, ","); got != "topics/a,topics/b,topics/c" {
			t.Fatalf("pages of topics: %s", got)
		}
		if err := kvs.KVDelete(ctx, "topics", "b"); err != nil {
			t.Fatal(err)
		}
		if err := kvs.KVDelete(ctx, "topics", "b"); !errors.Is(err, dtx.ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		if all, err := kvs.KVList(ctx, "topics", "", 100); err != nil || len(all) != 2 {
			t.Fatalf("after delete: %v %v", all, err)
		}
	})
}
