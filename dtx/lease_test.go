package dtx_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestClaimIsExclusive: coordinators claiming concurrently in batches never
// get the same transaction while its lease runs, and get it again once the
// lease lapses. For MySQL each claimer has its own store (connection pool),
// as separate sluice processes would.
func TestClaimIsExclusive(t *testing.T) {
	sandboxtest.SkipShort(t)
	t.Run("bolt", func(t *testing.T) {
		st := boltStore(t)
		claimTest(t, []dtx.Store{st, st, st, st})
	})
	t.Run("mysql", func(t *testing.T) {
		var sts []dtx.Store
		for i := 0; i < 4; i++ {
			sts = append(sts, mysqlStore(t, "dtx_claim"))
		}
		claimTest(t, sts)
	})
}

func claimTest(t *testing.T, stores []dtx.Store) {
	ctx := context.Background()
	const n = 300
	past := time.Now().UTC().Add(-time.Minute)
	var muts []*dtx.Mutation
	for i := 0; i < n; i++ {
		g := &dtx.Global{Gid: fmt.Sprintf("c%04d", i), TransType: dtx.TypeSaga, Status: dtx.StatusSubmitted, CreateTime: past, NextCronTime: past}
		muts = append(muts, &dtx.Mutation{Gid: g.Gid, Create: true, Global: g})
	}
	// One finished and one stuck transaction are never claimed.
	fin := &dtx.Global{Gid: "fin", TransType: dtx.TypeSaga, Status: dtx.StatusSucceed, FinishTime: past}
	stuck := &dtx.Global{Gid: "stuck", TransType: dtx.TypeSaga, Status: dtx.StatusAborting, NextCronTime: past, Stuck: "x"}
	muts = append(muts, &dtx.Mutation{Gid: "fin", Create: true, Global: fin}, &dtx.Mutation{Gid: "stuck", Create: true, Global: stuck})
	errs, err := stores[0].Apply(ctx, muts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("create %d: %v", i, e)
		}
	}
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	now := time.Now().UTC()
	for w, st := range stores {
		wg.Add(1)
		go func(w int, st dtx.Store) {
			defer wg.Done()
			for round := 0; ; round++ {
				token := fmt.Sprintf("w%d-%d", w, round)
				got, err := st.Claim(ctx, token, now, now.Add(time.Hour), 16)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, g := range got {
					if prev, dup := owner[g.Gid]; dup {
						t.Errorf("%s claimed by %s and %s", g.Gid, prev, token)
					}
					if g.Owner != token {
						t.Errorf("%s: owner %q, want %q", g.Gid, g.Owner, token)
					}
					owner[g.Gid] = token
				}
				mu.Unlock()
			}
		}(w, st)
	}
	wg.Wait()
	if len(owner) != n {
		t.Fatalf("claimed %d transactions, want %d", len(owner), n)
	}
	if _, ok := owner["fin"]; ok {
		t.Fatal("claimed a finished transaction")
	}
	if _, ok := owner["stuck"]; ok {
		t.Fatal("claimed a stuck transaction")
	}
	// While the leases run nothing is due; after they lapse everything is.
	if got, _ := stores[1].Claim(ctx, "early", now.Add(time.Minute), now.Add(2*time.Hour), 1000); len(got) != 0 {
		t.Fatalf("claimed %d transactions under a running lease", len(got))
	}
	if got, _ := stores[2].Claim(ctx, "late", now.Add(2*time.Hour), now.Add(3*time.Hour), 1000); len(got) != n {
		t.Fatalf("claimed %d transactions after the leases lapsed, want %d", len(got), n)
	}
	// A lapsed owner's fenced write fails.
	g := &dtx.Global{Gid: "c0000", TransType: dtx.TypeSaga, Status: dtx.StatusSucceed}
	errs, err = stores[3].Apply(ctx, []*dtx.Mutation{{Gid: "c0000", Global: g, IfOwner: owner["c0000"], IfStatus: []string{dtx.StatusSubmitted}}})
	if err != nil {
		t.Fatal(err)
	}
	if ce, ok := errs[0].(*dtx.ConflictError); !ok || !ce.LostLease {
		t.Fatalf("fenced write by the old owner: %v", errs[0])
	}
}
