package difftest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

var (
	env *Env
	// The fixed set runs with -short too? No: it needs real servers and a
	// minute or two, like the other integration tests.
	flagSeeds = flag.String("difftest.seeds", "", "comma-separated seeds to run instead of the fixed set")
	flagDur   = flag.Duration("difftest.duration", 0, "workload time per seed (default: the fixed set's)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "difftest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err := sandboxtest.SluiceBinary(dir) // $SLUICE_TEST_BIN under make test
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, err = NewEnv(bin, dir, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err, "(is mariadb-server installed? run 'make deps')")
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	if code == 0 {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// fixedSeeds is the short set that `make test` runs: both commit orders,
// kills in the copy and in replication, DDL, a target restart. Seeds of
// failures found and fixed are added here.
var fixedSeeds = []struct {
	seed int64
	why  string
}{
	{1, "relaxed order; a kill in the copy, kills and target restarts in replication"},
	{4, "source order; kills, target restarts, DDL of every kind (found the DROP PRIMARY KEY and _bin-key compaction bugs)"},
	{6, "source order; a kill in the copy (found the RENAME swap re-run, and with FK trees a parent and child copied from two snapshots)"},
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestFixedSeeds runs the fixed set of seeds. A failure names the seed;
// `make difftest SEEDS=1 ...` or -difftest.seeds reruns it.
func TestFixedSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB sandboxes")
	}
	cfg := DefaultConfig()
	cfg.Duration = 15 * time.Second
	if *flagDur > 0 {
		cfg.Duration = *flagDur
	}
	cfg.Out = testWriter{t}
	cfg.Features = knownBugs
	seeds := fixedSeeds
	if *flagSeeds != "" {
		seeds = nil
		for _, s := range strings.Split(*flagSeeds, ",") {
			var n int64
			fmt.Sscan(s, &n)
			seeds = append(seeds, struct {
				seed int64
				why  string
			}{n, "flag"})
		}
	}
	for _, s := range seeds {
		res, err := Run(context.Background(), env, cfg, s.seed)
		if err != nil {
			t.Fatalf("seed %d: %v", s.seed, err)
		}
		t.Log(res.Summary())
		if !res.Pass {
			t.Errorf("seed %d (%s) failed; task dir %s:\n%s", s.seed, s.why, res.Dir, strings.Join(res.Problems, "\n"))
		}
	}
}

// knownBugs switches off what hits bugs that are not fixed yet (see
// docs/difftest.md); a switch goes here only until its fix lands. The
// generator classes of issue 29 found bugs N1-N13 on main 02602c7; the
// fixes of FK cascades, target triggers, statement format, savepoints, DDL
// session, helper names, DDL re-runs and XA are merged, so those classes
// run. So do FK trees (seed 6, killed in the copy, stopped with 1451 while
// a resumed copy held a parent and its child from two snapshots; the copy
// now loads FK-linked tables from one snapshot, load/fkgroups.go), CHECK
// rows written with check_constraint_checks=0 (the full copy refused them
// with 4025; its sessions now skip CHECK constraints as the applier's do).
// So do savepoints: their Aria table's full copy is exact (read under a
// table lock, idempotent chunk loads; seeds 2703-2707), and an Aria group
// cut by a target restart is marked and replayed idempotently
// (apply/nontxreplay.go; seeds 2708, 2735 stopped with Duplicate entry).
// Still off: sequences and system-versioned tables as data (sluice
// refuses them by design; their stop classes run).
//
// XA runs: its class starts once the copy has its snapshot (a transaction
// the tester kept prepared while a statement waited for its rows made
// FLUSH TABLES WITH READ LOCK time out: seed 4 once), and the copy refuses
// a snapshot while an XA transaction is prepared (classes_xa.go).
var knownBugs = Features{NoSequences: true, NoSysVersioned: true}

func runScript(t *testing.T, sc Script) *Result {
	t.Helper()
	if testing.Short() {
		t.Skip("needs MariaDB sandboxes")
	}
	cfg := DefaultConfig()
	cfg.Out = testWriter{t}
	res, err := RunScript(context.Background(), env, cfg, sc)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
