package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// srv is the package's durable redis-server (appendfsync always, a password).
var srv *sandboxtest.Redis

func TestMain(m *testing.M) {
	if sandboxtest.Short() {
		os.Exit(m.Run()) // make test-unit: the tests that need redis-server skip
	}
	r, stop, err := sandboxtest.NewRedis()
	if err != nil {
		// CI installs redis-server: its absence is a failure, not a skip.
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	srv = r
	code := m.Run()
	stop()
	os.Exit(code)
}

// open opens a store on r under a prefix of the test's own.
func open(t *testing.T, r *sandboxtest.Redis, query string) *Store {
	t.Helper()
	c, err := ParseURL(r.URL(0) + "?prefix=" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + query)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func saga(gid, status string, now time.Time) *dtx.Global {
	return &dtx.Global{Gid: gid, TransType: dtx.TypeSaga, Status: status, CreateTime: now, UpdateTime: now, NextCronTime: now,
		Steps: []map[string]string{{"action": "http://a/x", "compensate": "http://a/y"}}, Payloads: []string{"{}"}}
}

func create(t *testing.T, s *Store, gs ...*dtx.Global) {
	t.Helper()
	muts := make([]*dtx.Mutation, len(gs))
	for i, g := range gs {
		muts[i] = &dtx.Mutation{Gid: g.Gid, Create: true, Global: g, NewBranches: dtx.GenBranches(g)}
	}
	errs, err := s.Apply(context.Background(), muts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("create %s: %v", gs[i].Gid, e)
		}
	}
}

func TestParseURL(t *testing.T) {
	t.Setenv("DTX_REDIS_PW", "s3cret-env")
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url  string
		want Config
	}{
		{"redis://127.0.0.1:6380/2", Config{Addr: "127.0.0.1:6380", DB: 2}},
		{"redis://db1", Config{Addr: "db1:6379"}},
		{"redis://:pw@db1:6379/0", Config{Addr: "db1:6379", Password: "pw"}},
		{"redis://dtx:p%40ss@db1:6379/1?durability=relaxed&prefix=x:", Config{Addr: "db1:6379", Username: "dtx", Password: "p@ss", DB: 1, Durability: Relaxed, Prefix: "x:"}},
		{"redis://dtx:${DTX_REDIS_PW}@db1:6379/3", Config{Addr: "db1:6379", Username: "dtx", Password: "s3cret-env", DB: 3}},
		{"redis://:${DTX_REDIS_PW}@[::1]:7000/0", Config{Addr: "[::1]:7000", Password: "s3cret-env"}},
		{"redis://db1:6379/0?password-file=" + pwFile + "&pool-size=4", Config{Addr: "db1:6379", Password: "s3cret-file", PoolSize: 4}},
	} {
		got, err := ParseURL(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		want := DefaultConfig()
		want.Addr, want.Username, want.Password, want.DB = c.want.Addr, c.want.Username, c.want.Password, c.want.DB
		if c.want.Durability != "" {
			want.Durability = c.want.Durability
		}
		if c.want.Prefix != "" {
			want.Prefix = c.want.Prefix
		}
		if c.want.PoolSize != 0 {
			want.PoolSize = c.want.PoolSize
		}
		if got.Addr != want.Addr || got.Username != want.Username || got.Password != want.Password || got.DB != want.DB ||
			got.Durability != want.Durability || got.Prefix != want.Prefix || got.PoolSize != want.PoolSize || got.TLS != nil {
			t.Errorf("%s: got %+v, want %+v", c.url, got, want)
		}
	}
	if c, err := ParseURL("rediss://:pw@redis.example:6380/0"); err != nil || c.TLS == nil || c.TLS.ServerName != "redis.example" || c.TLS.InsecureSkipVerify {
		t.Errorf("rediss: %+v %v", c, err)
	}
	if c, err := ParseURL("rediss://redis.example/0?tls-mode=required"); err != nil || c.TLS == nil || !c.TLS.InsecureSkipVerify {
		t.Errorf("rediss required: %v", err)
	}
	// Bad URLs: one line each, naming the problem, never the password.
	for _, u := range []string{
		"redis://:s3cret@db1:notaport/0",
		"redis://:s3cret@db1:6379/x",
		"redis://:s3cret@:6379/0",
		"redis://:s3cret@db1:6379/0?durability=sometimes",
		"redis://:s3cret@db1:6379/0?bogus=1",
		"redis://:s3cret@db1:6379/0?tls-ca=/x",
		"redis://:s3cret@db1:6379/0?password-file=" + pwFile,
		"redis://:${NO_SUCH_VAR_S3CRET}@db1:6379/0",
		"rediss://:s3cret@db1:6379/0?tls-ca=/nonexistent/ca.pem",
		"redis://:s3cret@db1:6379/0?pool-size=0",
		"mysql://:s3cret@db1:6379/0",
		"redis://:s3cret@db1:6379/0\x7f",
	} {
		_, err := ParseURL(u)
		if err == nil {
			t.Errorf("%s: no error", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error shows the password or spans lines: %v", u, err)
		}
	}
	c, _ := ParseURL("redis://u:s3cret@db1:6379/0")
	for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("the config prints its password: %s", s)
		}
	}
}

// TestStoreSemantics goes through what the shared contract (dtx's
// store_test.go) does not: derived and registered branches, updates kept
// apart from the row, Claim's filters, List's filters and pages, Purge.
func TestStoreSemantics(t *testing.T) {
	sandboxtest.SkipShort(t)
	s := open(t, srv, "")
	ctx := context.Background()
	now := time.Now().UTC()

	// A saga's branches come from its steps, with their statuses.
	g := saga("s1", dtx.StatusSubmitted, now)
	create(t, s, g)
	got, bs, err := s.Get(ctx, "s1")
	if err != nil || got.Status != dtx.StatusSubmitted || len(bs) != 2 || bs[0].Op != dtx.OpCompensate || bs[1].URL != "http://a/x" || !bs[1].CreateTime.Equal(now) {
		t.Fatalf("saga: %+v %+v %v", got, bs, err)
	}
	// An update the row does not record is kept beside it.
	errs, err := s.Apply(ctx, []*dtx.Mutation{{Gid: "s1", BranchUpdates: []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusSucceed, FinishTime: now}}}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if _, bs, _ := s.Get(ctx, "s1"); bs[1].Status != dtx.StatusSucceed || !bs[1].FinishTime.Equal(now) || bs[0].Status != dtx.StatusPrepared {
		t.Fatalf("after a branch update: %+v", bs)
	}

	// A TCC's branches are registered in order; a retried register adds none.
	tcc := &dtx.Global{Gid: "t1", TransType: dtx.TypeTCC, Status: dtx.StatusPrepared, CreateTime: now, NextCronTime: now.Add(time.Hour)}
	create(t, s, tcc)
	reg := func(ids ...string) {
		var nb []dtx.Branch
		for _, id := range ids {
			nb = append(nb, dtx.Branch{Gid: "t1", BranchID: id, Op: dtx.OpCancel, URL: "http://b/cancel" + id, Status: dtx.StatusPrepared},
				dtx.Branch{Gid: "t1", BranchID: id, Op: dtx.OpConfirm, URL: "http://b/confirm" + id, BinData: []byte("d" + id), Status: dtx.StatusPrepared})
		}
		errs, err := s.Apply(ctx, []*dtx.Mutation{{Gid: "t1", NewBranches: nb, IfStatus: []string{dtx.StatusPrepared}}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	reg("01")
	reg("02", "01")
	_, bs, err = s.Get(ctx, "t1")
	if err != nil || len(bs) != 4 || bs[0].BranchID != "01" || bs[2].BranchID != "02" || string(bs[3].BinData) != "d02" || bs[1].Op != dtx.OpConfirm || bs[0].CreateTime.IsZero() {
		t.Fatalf("tcc branches: %+v %v", bs, err)
	}

	// Claim: due only when both the cron time and the lease have passed;
	// never stuck, finished or unscheduled ones.
	past := now.Add(-time.Minute)
	due := saga("c-due", dtx.StatusSubmitted, past)
	leased := saga("c-leased", dtx.StatusSubmitted, past)
	leased.Owner, leased.LeaseUntil = "other", now.Add(time.Minute)
	stuck := saga("c-stuck", dtx.StatusSubmitted, past)
	stuck.Stuck = "01"
	done := saga("c-done", dtx.StatusSucceed, past)
	done.FinishTime = past
	idle := saga("c-idle", dtx.StatusSubmitted, past)
	idle.NextCronTime = time.Time{}
	later := saga("c-later", dtx.StatusSubmitted, past)
	later.NextCronTime = now.Add(time.Minute)
	create(t, s, due, leased, stuck, done, idle, later)
	s1 := saga("s1", dtx.StatusSubmitted, now) // s1 and t1 are due later
	s1.NextCronTime = now.Add(time.Hour)
	if errs, err := s.Apply(ctx, []*dtx.Mutation{{Gid: "s1", Global: s1}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	lease := now.Add(30 * time.Second)
	cl, err := s.Claim(ctx, "me", now, lease, 10)
	if err != nil || len(cl) != 1 || cl[0].Gid != "c-due" || cl[0].Owner != "me" || !cl[0].LeaseUntil.Equal(lease) {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if g, _, _ := s.Get(ctx, "c-due"); g.Owner != "me" || !g.LeaseUntil.Equal(lease) {
		t.Fatalf("claimed row: %+v", g)
	}
	if cl, err := s.Claim(ctx, "you", now.Add(time.Second), now.Add(time.Minute), 10); err != nil || len(cl) != 0 {
		t.Fatalf("claim while the lease runs: %+v %v", cl, err)
	}
	// The owner's update keeps to its lease; another's loses it.
	errs, err = s.Apply(ctx, []*dtx.Mutation{{Gid: "c-due", Global: due, IfOwner: "you"}, {Gid: "c-due", Global: cl[0], IfOwner: "me"}})
	var ce *dtx.ConflictError
	if err != nil || !errors.As(errs[0], &ce) || !ce.LostLease || errs[1] != nil {
		t.Fatalf("owner preconditions: %v %v", errs, err)
	}
	if cl, err := s.Claim(ctx, "you", now.Add(2*time.Minute), now.Add(3*time.Minute), 10); err != nil || strings.Join(sorted(gids(cl)), ",") != "c-due,c-later,c-leased" {
		t.Fatalf("claim after the leases: %v %v", gids(cl), err)
	}

	// List: gid order, filters, pages.
	l, err := s.List(ctx, "", 100, "", "")
	if err != nil || len(l) != 8 || l[0].Gid != "c-done" || l[7].Gid != "t1" {
		t.Fatalf("list: %v %v", gids(l), err)
	}
	if l, err := s.List(ctx, "c-leased", 2, "", ""); err != nil || strings.Join(gids(l), ",") != "c-stuck,s1" {
		t.Fatalf("list after: %v %v", gids(l), err)
	}
	if l, err := s.List(ctx, "", 100, dtx.StatusSucceed, ""); err != nil || strings.Join(gids(l), ",") != "c-done" {
		t.Fatalf("list succeed: %v %v", gids(l), err)
	}
	if l, err := s.List(ctx, "", 100, "", dtx.TypeTCC); err != nil || strings.Join(gids(l), ",") != "t1" {
		t.Fatalf("list tcc: %v %v", gids(l), err)
	}

	// Purge: finished before the time, with their keys.
	if n, err := s.Purge(ctx, past, 10); err != nil || n != 0 {
		t.Fatalf("purge before it finished: %d %v", n, err)
	}
	if n, err := s.Purge(ctx, now, 10); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, _, err := s.Get(ctx, "c-done"); !errors.Is(err, dtx.ErrNotFound) {
		t.Fatalf("purged: %v", err)
	}
	if n, err := s.c.Exists(ctx, s.prefix+"g:c-done").Result(); err != nil || n != 0 {
		t.Fatalf("purged keys: %d %v", n, err)
	}
}

func sorted(s []string) []string { sort.Strings(s); return s }

func gids(l []*dtx.Global) []string {
	var out []string
	for _, g := range l {
		out = append(out, g.Gid)
	}
	return out
}

// TestListFilterPages: a filter that matches few of many transactions
// pages through them in several script runs, in order.
func TestListFilterPages(t *testing.T) {
	sandboxtest.SkipShort(t)
	s := open(t, srv, "")
	now := time.Now().UTC()
	var gs []*dtx.Global
	for i := 0; i < 3*listBudget; i++ {
		st := dtx.StatusSubmitted
		if i%97 == 0 {
			st = dtx.StatusFailed
		}
		gs = append(gs, saga(fmt.Sprintf("g%05d", i), st, now))
	}
	create(t, s, gs...)
	l, err := s.List(context.Background(), "g00001", 1000, dtx.StatusFailed, dtx.TypeSaga)
	if err != nil {
		t.Fatal(err)
	}
	want := (3*listBudget-1)/97 + 1 - 1 // every 97th, g00000 excluded
	if len(l) != want || l[0].Gid != "g00097" {
		t.Fatalf("got %d (%v...), want %d", len(l), gids(l[:min(3, len(l))]), want)
	}
	for i := 1; i < len(l); i++ {
		if l[i-1].Gid >= l[i].Gid || l[i].Status != dtx.StatusFailed {
			t.Fatalf("out of order or unfiltered at %d: %s %s", i, l[i-1].Gid, l[i].Gid)
		}
	}
}

// TestConcurrentClaim: many coordinators claiming at once never get the
// same transaction while its lease runs.
func TestConcurrentClaim(t *testing.T) {
	sandboxtest.SkipShort(t)
	s := open(t, srv, "")
	ctx := context.Background()
	now := time.Now().UTC()
	const n = 2000
	var gs []*dtx.Global
	for i := 0; i < n; i++ {
		gs = append(gs, saga(fmt.Sprintf("cc%04d", i), dtx.StatusSubmitted, now.Add(-time.Second)))
	}
	create(t, s, gs...)
	var mu sync.Mutex
	claimedBy := map[string]string{}
	var wg sync.WaitGroup
	var dup atomic.Int32
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				token := fmt.Sprintf("w%d", w)
				now := time.Now().UTC()
				cl, err := s.Claim(ctx, token, now, now.Add(time.Hour), 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cl) == 0 {
					return
				}
				mu.Lock()
				for _, g := range cl {
					if prev, ok := claimedBy[g.Gid]; ok {
						dup.Add(1)
						t.Errorf("%s claimed by %s and %s", g.Gid, prev, token)
					}
					claimedBy[g.Gid] = token
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if len(claimedBy) != n || dup.Load() != 0 {
		t.Fatalf("claimed %d of %d, %d twice", len(claimedBy), n, dup.Load())
	}
}

// TestApplyAtomicToReaders: a concurrent Claim or List sees all of a batch
// or none of it.
func TestApplyAtomicToReaders(t *testing.T) {
	sandboxtest.SkipShort(t)
	s := open(t, srv, "")
	ctx := context.Background()
	const batches, size = 150, 10 // fewer than listBudget transactions: one List is one script
	stop := make(chan struct{})
	var readers sync.WaitGroup
	seen := map[string]int{} // batch -> transactions claimed
	var mu sync.Mutex
	var claims, lists atomic.Int64
	readers.Add(2)
	go func() { // claims every due transaction it finds, for an hour
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now().UTC()
			cl, err := s.Claim(ctx, "reader", now, now.Add(time.Hour), 10000)
			if err != nil {
				t.Error(err)
				return
			}
			per := map[string]int{}
			for _, g := range cl {
				per[g.Gid[:strings.IndexByte(g.Gid, '.')]]++
			}
			mu.Lock()
			for b, k := range per {
				if k != size {
					t.Errorf("a claim saw %d of batch %s's %d transactions", k, b, size)
				}
				seen[b] += k
			}
			mu.Unlock()
			claims.Add(1)
		}
	}()
	go func() { // lists the failed ones: a batch fails all its transactions at once
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := s.List(ctx, "", 100000, dtx.StatusFailed, "")
			if err != nil {
				t.Error(err)
				return
			}
			per := map[string]int{}
			for _, g := range l {
				per[g.Gid[:strings.IndexByte(g.Gid, '.')]]++
			}
			for b, k := range per {
				if k != size {
					t.Errorf("a list saw %d of batch %s's %d failures", k, b, size)
				}
			}
			lists.Add(1)
		}
	}()
	for b := 0; b < batches; b++ {
		now := time.Now().UTC()
		var muts []*dtx.Mutation
		var gs []*dtx.Global
		for i := 0; i < size; i++ {
			g := saga(fmt.Sprintf("b%03d.%d", b, i), dtx.StatusSubmitted, now.Add(-time.Second))
			gs = append(gs, g)
			muts = append(muts, &dtx.Mutation{Gid: g.Gid, Create: true, Global: g})
		}
		if errs, err := s.Apply(ctx, muts); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		if b%3 == 0 { // then fail them all in one batch
			muts = muts[:0]
			for _, g := range gs {
				f := g.Clone()
				f.Status, f.FinishTime, f.NextCronTime = dtx.StatusFailed, now, time.Time{}
				muts = append(muts, &dtx.Mutation{Gid: g.Gid, Global: f})
			}
			if errs, err := s.Apply(ctx, muts); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
		}
	}
	// Let the readers look at the end state too, then stop them.
	for c, l := claims.Load(), lists.Load(); claims.Load() < c+2 || lists.Load() < l+2; {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	readers.Wait()
	t.Logf("%d claims, %d lists ran beside %d batches", claims.Load(), lists.Load(), batches)
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, k := range seen {
		total += k
	}
	if want := batches * size; total > want {
		t.Fatalf("claimed %d of %d", total, want)
	}
}

// TestRestartKeepsAcknowledged: with appendfsync always, every batch Apply
// acknowledged before a kill -9 of redis-server is there after its restart.
func TestRestartKeepsAcknowledged(t *testing.T) {
	r := sandboxtest.StartRedis(t)
	s := open(t, r, "")
	ctx := context.Background()
	var acked sync.Map // gid -> status acknowledged last
	var nacked atomic.Int64
	var stopping atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stopping.Load(); i++ {
				now := time.Now().UTC()
				var muts []*dtx.Mutation
				for j := 0; j < 4; j++ {
					g := saga(fmt.Sprintf("w%d-%d-%d", w, i, j), dtx.StatusSubmitted, now)
					muts = append(muts, &dtx.Mutation{Gid: g.Gid, Create: true, Global: g})
				}
				errs, err := s.Apply(ctx, muts)
				if err != nil {
					continue // not acknowledged: may or may not be there
				}
				for j, m := range muts {
					if errs[j] != nil {
						t.Errorf("%s: %v", m.Gid, errs[j])
					}
					acked.Store(m.Gid, dtx.StatusSubmitted)
				}
				nacked.Add(int64(len(muts)))
				// And move the first one on, acknowledged too.
				f := muts[0].Global.Clone()
				f.Status = dtx.StatusAborting
				errs, err = s.Apply(ctx, []*dtx.Mutation{{Gid: f.Gid, Global: f, IfStatus: []string{dtx.StatusSubmitted}}})
				switch {
				case err == nil && errs[0] == nil:
					acked.Store(f.Gid, dtx.StatusAborting)
				case err != nil: // not acknowledged: either status
					acked.Store(f.Gid, dtx.StatusSubmitted+"|"+dtx.StatusAborting)
				default:
					t.Errorf("%s: %v", f.Gid, errs[0])
				}
			}
		}(w)
	}
	// Kill once writes are flowing (progress, not a sleep), and again after the restart.
	for round := 0; round < 2; round++ {
		for start := nacked.Load(); nacked.Load() < start+400; {
			time.Sleep(time.Millisecond)
		}
		r.Kill()
		r.Restart(t)
	}
	for start := nacked.Load(); nacked.Load() < start+100; {
		time.Sleep(time.Millisecond)
	}
	stopping.Store(true)
	wg.Wait()
	n := 0
	acked.Range(func(k, v any) bool {
		g, _, err := s.Get(ctx, k.(string))
		if err != nil || !strings.Contains("|"+v.(string)+"|", "|"+g.Status+"|") {
			t.Errorf("%s acknowledged as %s: %+v %v", k, v, g, err)
		}
		n++
		return true
	})
	t.Logf("%d acknowledged transactions kept over 2 kill -9s", n)
}

// TestRetryGetsTheOutcome: a batch run again (its reply was lost) returns
// the first run's outcome and applies nothing twice.
func TestRetryGetsTheOutcome(t *testing.T) {
	sandboxtest.SkipShort(t)
	s := open(t, srv, "")
	ctx := context.Background()
	g := saga("r1", dtx.StatusSubmitted, time.Now().UTC())
	doc := `{"gid":"r1","trans_type":"saga","status":"submitted"}`
	args := []any{s.prefix, "batch-1", "1", "C", "r1", "0", "", "1", g.Status, g.TransType, "", "0", "", "", "0", doc, "0", "0"}
	for i := 0; i < 2; i++ {
		v, err := s.run(ctx, applyScript, false, args...)
		if r, _ := v.([]any); err != nil || len(r) != 1 || r[0] != "" {
			t.Fatalf("run %d: %v %v", i, v, err)
		}
	}
	args[1] = "batch-2"
	if v, err := s.run(ctx, applyScript, false, args...); err != nil || v.([]any)[0] != "E" {
		t.Fatalf("another batch: %v %v", v, err)
	}
}

// TestRefusesNonDurable: a server that may lose acknowledged writes is
// refused with the fix, unless the URL accepts it knowingly.
func TestRefusesNonDurable(t *testing.T) {
	for _, opts := range [][]string{{"--appendfsync", "everysec"}, {"--appendonly", "no"}, {"--no-appendfsync-on-rewrite", "yes"}} {
		r := sandboxtest.StartRedis(t, opts...)
		c, err := ParseURL(r.URL(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "not durable") || !strings.Contains(err.Error(), "durability=relaxed") || strings.Contains(err.Error(), r.Password) {
			t.Fatalf("%v: %v", opts, err)
		}
		t.Logf("%v: %v", opts, err)
		s := open(t, r, "&durability=relaxed")
		create(t, s, saga("x", dtx.StatusSubmitted, time.Now().UTC()))
	}
	// Eviction loses transactions with no crash: refused even when relaxed.
	r := sandboxtest.StartRedis(t, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	c, _ := ParseURL(r.URL(0) + "?durability=relaxed")
	if _, err := Open(context.Background(), c); err == nil || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("allkeys-lru: %v", err)
	}
}

// TestPasswordNeverInErrors: failures to connect or authenticate name the
// server, never the password.
func TestPasswordNeverInErrors(t *testing.T) {
	sandboxtest.SkipShort(t)
	const secret = "n0t-the-Passw0rd"
	ctx := context.Background()
	check := func(what string, c Config) {
		t.Helper()
		c.Timeout = 2 * time.Second
		_, err := Open(ctx, c)
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), srv.Password) {
			t.Fatalf("%s: the error shows the password: %v", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
	c, _ := ParseURL(srv.URL(0))
	c.Password = secret
	check("wrong password", c)
	c.Username = "nobody"
	check("wrong user", c)
	c, _ = ParseURL(srv.URL(0))
	c.Addr = "127.0.0.1:1"
	check("nothing listening", c)
	c, _ = ParseURL(srv.URL(0))
	c.DB = 99
	check("no such database", c)
}

// TestRecheckedOnNewConnections: a server whose configuration changes
// under a running store is refused on the store's next connection.
func TestRecheckedOnNewConnections(t *testing.T) {
	r := sandboxtest.StartRedis(t)
	s := open(t, r, "")
	ctx := context.Background()
	create(t, s, saga("before", dtx.StatusSubmitted, time.Now().UTC()))
	admin := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.Password, Protocol: 2})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	g := saga("after", dtx.StatusSubmitted, time.Now().UTC())
	_, err := s.Apply(ctx, []*dtx.Mutation{{Gid: g.Gid, Create: true, Global: g}})
	if err == nil || !strings.Contains(err.Error(), "appendfsync everysec") || !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("apply on a server no longer durable: %v", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("the refusal lacks its fix: %v", err)
	}
}
