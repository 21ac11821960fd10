package barrier_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx/barrier"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

var db *sql.DB

func TestMain(m *testing.M) {
	if sandboxtest.Short() {
		os.Exit(m.Run()) // make test-unit: the tests that need the server skip
	}
	inst, stop, err := sandboxtest.New("barrier")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	db, err = sql.Open("mysql", inst.DSN("")+"?interpolateParams=true")
	if err == nil {
		db.SetMaxOpenConns(64)
		err = setup()
	}
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	db.Close()
	stop()
	os.Exit(code)
}

func setup() error {
	ctx := context.Background()
	if err := barrier.CreateTable(ctx, db, ""); err != nil {
		return err
	}
	for _, s := range []string{
		"CREATE DATABASE IF NOT EXISTS busi",
		"CREATE TABLE busi.effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, gid VARCHAR(128), op VARCHAR(32), KEY(gid))",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// call is one branch call a coordinator (or a network duplicate) makes.
func call(ctx context.Context, transType, gid, op string) error {
	q := url.Values{"trans_type": {transType}, "gid": {gid}, "branch_id": {"01"}, "op": {op}}
	b, err := barrier.FromQuery(q)
	if err != nil {
		return err
	}
	return b.CallWithDB(ctx, db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO busi.effect (gid, op) VALUES (?, ?)", gid, op)
		return err
	})
}

func effects(t *testing.T, gid string) map[string]int {
	t.Helper()
	rows, err := db.Query("SELECT op, COUNT(*) FROM busi.effect WHERE gid=? GROUP BY op", gid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var op string
		var n int
		if err := rows.Scan(&op, &n); err != nil {
			t.Fatal(err)
		}
		out[op] = n
	}
	return out
}

// model is dtm's barrier semantics: which business effects a sequence of
// calls must produce.
func model(ops []string) map[string]int {
	origin := map[string]string{"cancel": "try", "compensate": "action"}
	rows := map[string]bool{}
	out := map[string]int{}
	for _, op := range ops {
		nullComp := false
		if o := origin[op]; o != "" && !rows[o] {
			rows[o] = true // the rollback takes the origin's place
			nullComp = true
		}
		if rows[op] {
			continue // repeated, or hanging after its rollback
		}
		rows[op] = true
		if !nullComp {
			out[op]++
		}
	}
	return out
}

var modes = map[string][]string{"tcc": {"try", "confirm", "cancel"}, "saga": {"action", "compensate"}}

func randomOps(r *rand.Rand, ops []string) []string {
	var seq []string
	for _, op := range ops {
		for n := r.Intn(4); n > 0; n-- { // 0-3 copies: missing, single, duplicated
			seq = append(seq, op)
		}
	}
	r.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
	return seq
}

// TestSequentialMatchesModel: duplicated and reordered calls, one after the
// other, produce exactly the effects dtm's semantics define.
func TestSequentialMatchesModel(t *testing.T) {
	sandboxtest.SkipShort(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	for i := 0; i < 150; i++ {
		for tt, ops := range modes {
			gid := fmt.Sprintf("seq-%d-%d-%s", seed, i, tt)
			seq := randomOps(r, ops)
			for _, op := range seq {
				if err := call(ctx, tt, gid, op); err != nil {
					t.Fatalf("%s %v: %v", gid, seq, err)
				}
			}
			got, want := effects(t, gid), model(seq)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: calls %v gave effects %v, want %v", gid, seq, got, want)
			}
		}
	}
}

// TestConcurrent: duplicated calls racing each other still run each
// business effect at most once, never compensate an action that did not
// run, and leave no action without its compensation once a rollback came.
func TestConcurrent(t *testing.T) {
	sandboxtest.SkipShort(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		for tt, ops := range modes {
			gid := fmt.Sprintf("conc-%d-%d-%s", seed, i, tt)
			seq := randomOps(r, ops)
			var wg sync.WaitGroup
			errs := make(chan error, len(seq))
			for _, op := range seq {
				wg.Add(1)
				go func(op string) {
					defer wg.Done()
					errs <- call(ctx, tt, gid, op)
				}(op)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("%s: %v", gid, err)
				}
			}
			got := effects(t, gid)
			action, rollback := ops[0], ops[len(ops)-1]
			called := map[string]bool{}
			for _, op := range seq {
				called[op] = true
			}
			for op, n := range got {
				if n != 1 || !called[op] {
					t.Fatalf("%s: calls %v gave effects %v: an effect ran twice or uncalled", gid, seq, got)
				}
			}
			if got[rollback] > 0 && got[action] == 0 {
				t.Fatalf("%s: calls %v gave effects %v: compensated an action that never ran", gid, seq, got)
			}
			if called[rollback] && got[action] != got[rollback] {
				t.Fatalf("%s: calls %v gave effects %v: an action hangs without its compensation", gid, seq, got)
			}
		}
	}
}

// FuzzSequence explores call sequences: each byte picks an op.
func FuzzSequence(f *testing.F) {
	sandboxtest.SkipShort(f)
	f.Add([]byte{0, 2, 0, 1})
	f.Add([]byte{2, 0, 0})
	f.Add([]byte{1, 1, 2, 0, 2})
	f.Add([]byte{3, 4, 3, 4, 4})
	f.Add([]byte{4, 3})
	all := []struct{ tt, op string }{{"tcc", "try"}, {"tcc", "confirm"}, {"tcc", "cancel"}, {"saga", "action"}, {"saga", "compensate"}}
	n := 0
	f.Fuzz(func(t *testing.T, seq []byte) {
		if len(seq) > 12 {
			seq = seq[:12]
		}
		n++
		ctx := context.Background()
		byType := map[string][]string{}
		gids := map[string]string{"tcc": fmt.Sprintf("fz-%d-%d-t", time.Now().UnixNano(), n), "saga": fmt.Sprintf("fz-%d-%d-s", time.Now().UnixNano(), n)}
		for _, c := range seq {
			x := all[int(c)%len(all)]
			byType[x.tt] = append(byType[x.tt], x.op)
			if err := call(ctx, x.tt, gids[x.tt], x.op); err != nil {
				t.Fatal(err)
			}
		}
		for tt, ops := range byType {
			got, want := effects(t, gids[tt]), model(ops)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%v gave %v, want %v", ops, got, want)
			}
		}
	})
}

// TestMsgQueryPrepared: the back-check of a 2-phase message.
func TestMsgQueryPrepared(t *testing.T) {
	sandboxtest.SkipShort(t)
	ctx := context.Background()
	local := func(gid string) error {
		return barrier.ForMsg(gid).CallWithDB(ctx, db, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO busi.effect (gid, op) VALUES (?, 'msg')", gid)
			return err
		})
	}
	qp := func(gid string) error {
		b, _ := barrier.New("msg", gid, "00", "msg")
		return b.QueryPrepared(ctx, db)
	}
	// committed before the check: SUCCESS, and a repeat is refused.
	if err := local("m1"); err != nil {
		t.Fatal(err)
	}
	if err := qp("m1"); err != nil {
		t.Fatalf("committed message: %v", err)
	}
	if err := local("m1"); err != barrier.ErrDuplicated {
		t.Fatalf("repeated local transaction: %v, want ErrDuplicated", err)
	}
	// checked before it committed: FAILURE, and it can never commit later.
	if err := qp("m2"); err != barrier.ErrFailure {
		t.Fatalf("uncommitted message: %v, want ErrFailure", err)
	}
	if err := local("m2"); err != barrier.ErrDuplicated {
		t.Fatalf("late local transaction: %v, want ErrDuplicated", err)
	}
	if got := effects(t, "m1")["msg"] + effects(t, "m2")["msg"]; got != 1 {
		t.Fatalf("effects %d, want 1", got)
	}
}
