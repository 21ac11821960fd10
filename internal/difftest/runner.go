package difftest

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Result is the outcome of one seed.
type Result struct {
	Seed           int64
	Order          string
	Pass           bool
	Refused        bool     // sluice stopped on DDL it documents as unsupported
	Problems       []string // what failed, first differences included
	Kills          int
	CopyKills      int // kills while the copy was running
	TargetRestarts int
	Rounds         int
	Stmts, Failed  int64
	DDL, DDLFailed int64
	Elapsed        time.Duration
	Dir            string // task directory and sluice.log
	// Classes are the generator classes the seed drew (classes.go).
	Classes []string
	// Refusal names the stop class whose expected refusal sluice gave.
	Refusal string
	// DDLKills counts kills that landed after a DDL reached the target and
	// before its checkpoint; DDLKillsMissed the tries that came too late.
	DDLKills, DDLKillsMissed int
	// Oracle is "off", "ok" or "differs"; OracleDiffs are the differences
	// between the native replica and the source (or why it could not be
	// compared): the generator's problem, not sluice's, so they do not
	// fail the seed.
	Oracle      string
	OracleDiffs []string
}

func (r *Result) fail(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Result) oracle(format string, args ...any) {
	r.OracleDiffs = append(r.OracleDiffs, fmt.Sprintf(format, args...))
}

// Summary is the per-seed line.
func (r *Result) Summary() string {
	verdict := "PASS"
	switch {
	case r.Refused:
		verdict = "REFUSED"
	case !r.Pass:
		verdict = "FAIL"
	}
	oracle := r.Oracle
	if len(r.OracleDiffs) > 0 {
		oracle = "differs"
	}
	extra := ""
	if len(r.Classes) > 0 {
		extra += " classes=" + strings.Join(r.Classes, ",")
	}
	if r.Refusal != "" {
		extra += " refused-as-expected=" + r.Refusal
	}
	if r.DDLKills+r.DDLKillsMissed > 0 {
		extra += fmt.Sprintf(" ddl-kills=%d/%d", r.DDLKills, r.DDLKills+r.DDLKillsMissed)
	}
	return fmt.Sprintf("seed %d order=%s %s: rounds=%d stmts=%d (%d failed on the source) ddl=%d (%d refused by the source) kills=%d (%d in the copy) target-restarts=%d oracle=%s%s %.1fs",
		r.Seed, r.Order, verdict, r.Rounds, r.Stmts, r.Failed, r.DDL, r.DDLFailed, r.Kills, r.CopyKills, r.TargetRestarts, oracle, extra, r.Elapsed.Seconds())
}

// seedRun is the state of one seed.
type seedRun struct {
	e      *Env
	cfg    Config
	seed   int64
	order  string
	schema string
	task   string
	dir    string
	res    *Result
	w      *workload
	sl     *sluiceProc
	out    func(format string, args ...any)
	script *Script
	// copyKill: the first kill lands in the copy. DDL then waits for the
	// copy to finish: a DDL while an interrupted copy is stopped is refused
	// as documented (docs/manual/fullcopy.md), not a data difference.
	copyKill bool
	faultRng *rand.Rand
	// slMu serialises kills and restarts of sluice between the fault
	// schedule and the classes that place their own kills.
	slMu sync.Mutex
	// expect is the stop class that fired: sluice must now stop with its
	// message.
	expect *stopClass
}

// Script is a fixed scenario instead of a generated one: Before runs on
// the source before sluice starts (the copy holds its effects), After while
// sluice replicates. Statements refer to the schema as {s}. Reduced
// failures become Scripts, and Scripts regression tests.
type Script struct {
	Name          string
	Before, After []string
	// Stopped, if set, runs once sluice has caught up with After and been
	// stopped cleanly (SIGTERM); then the same --mode all runs again.
	Stopped []string
}

// RunScript runs a Script as seed 0 would run (no kills, no DDL of its
// own) and compares the two sides.
func RunScript(ctx context.Context, e *Env, cfg Config, sc Script) (*Result, error) {
	cfg.Features.NoKills, cfg.Features.NoTargetRestart, cfg.Features.NoDDL = true, true, true
	return run(ctx, e, cfg, 0, &sc)
}

// Run runs one seed and returns its result; err is for failures of the
// tester itself (a sandbox that does not start), not of sluice.
func Run(ctx context.Context, e *Env, cfg Config, seed int64) (*Result, error) {
	return run(ctx, e, cfg, seed, nil)
}

func run(ctx context.Context, e *Env, cfg Config, seed int64, sc *Script) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Oracle && e.RepDB == nil {
		return nil, fmt.Errorf("difftest: the oracle is on but the Env has no native replica (NewEnv with oracle=true)")
	}
	start := time.Now()
	s := &seedRun{e: e, cfg: cfg, seed: seed, order: cfg.orderFor(seed),
		schema: fmt.Sprintf("dt_%d", seed), task: fmt.Sprintf("dt%d", seed), script: sc}
	if sc != nil {
		s.schema, s.task = "dt_"+sc.Name, "dt"+sc.Name
	}
	s.res = &Result{Seed: seed, Order: s.order, Oracle: "off"}
	if cfg.Oracle {
		s.res.Oracle = "ok"
	}
	s.out = func(format string, args ...any) {
		fmt.Fprintf(cfg.Out, "  seed %d: %s\n", seed, fmt.Sprintf(format, args...))
	}
	s.dir = filepath.Join(e.Dir, s.task)
	s.res.Dir = s.dir
	err := s.run(ctx)
	s.res.Elapsed = time.Since(start)
	if s.sl != nil {
		s.sl.kill()
	}
	if err != nil {
		return s.res, err
	}
	s.res.Pass = len(s.res.Problems) == 0 && !s.res.Refused
	if s.res.Pass {
		_ = os.RemoveAll(s.dir)
		s.dropSchemas(ctx)
	}
	return s.res, nil
}

func (s *seedRun) dropSchemas(ctx context.Context) {
	_, _ = s.e.SrcDB.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.schema+"`")
	_, _ = s.e.DstDB.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.schema+"`")
	_, _ = s.e.DstDB.ExecContext(ctx, "DROP DATABASE IF EXISTS sluice_meta")
}

func (s *seedRun) run(ctx context.Context) error {
	if err := s.e.startTarget(ctx); err != nil {
		return err
	}
	if s.cfg.Oracle {
		if err := s.prepareOracle(ctx); err != nil {
			return err
		}
	}
	s.dropSchemas(ctx)
	_ = os.RemoveAll(s.dir)
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		if s.cfg.Verbose {
			s.out(format, args...)
		}
	}
	s.w = &workload{seed: s.seed, schema: s.schema, f: s.cfg.Features, db: s.e.SrcDB, logf: logf}
	if s.script == nil {
		s.w.cls = drawClasses(s.seed, s.cfg.Features)
		s.res.Classes = s.w.cls.names()
		s.w.killAfter = s.killAfterSeq
	}
	if err := s.setup(ctx); err != nil {
		return fmt.Errorf("seed %d: set up the source: %w", s.seed, err)
	}
	taskFile, err := s.writeTask()
	if err != nil {
		return err
	}
	s.faultRng = rand.New(rand.NewSource(s.seed ^ 0xdead))
	s.copyKill = !s.cfg.Features.NoKills && s.faultRng.Intn(3) == 0
	s.sl = &sluiceProc{bin: s.e.Bin, taskFile: taskFile, log: filepath.Join(s.dir, "sluice.log")}
	if err := s.sl.start("all"); err != nil {
		return err
	}

	// The workload and the fault schedule run together until the duration
	// is over or sluice stops on its own.
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stopWork()
		deadline := time.Now().Add(s.cfg.Duration)
		dr := rand.New(rand.NewSource(s.seed ^ 0x5eed))
		if s.script != nil {
			// After must reach the target through replication, not the copy.
			for wctx.Err() == nil && !s.sl.exited() {
				if _, ok, _ := appliedPos(wctx, s.e.DstDB, s.task); ok {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, q := range s.script.After {
				if _, err := s.e.SrcDB.ExecContext(wctx, strings.ReplaceAll(q, "{s}", s.schema)); err != nil {
					s.out("script: %v: %s", err, q)
				}
			}
			if len(s.script.Stopped) > 0 {
				s.restartAround(wctx)
			}
			return
		}
		started := time.Now()
		for round := 0; time.Now().Before(deadline) && wctx.Err() == nil; round++ {
			ddlOK := true
			// The ddlkills class places its kills against the replication
			// checkpoint: its seeds hold DDL back until the copy is done.
			if s.copyKill || s.cfg.Features.NoDDLInCopy || s.w.cls.on[clsDDLKills] {
				_, ddlOK, _ = appliedPos(wctx, s.e.DstDB, s.task)
			}
			s.w.ddlOK.Store(ddlOK && !s.cfg.Features.NoDDL)
			if !s.w.xaOK.Load() && s.snapshotTaken() {
				s.w.xaOK.Store(true)
			}
			s.w.round(wctx, round)
			s.res.Rounds = round + 1
			if s.stopDue(started) {
				s.fireStop(wctx)
				return // the seed ends with the expected stop
			}
			if !ddlOK {
				continue
			}
			if !s.cfg.Features.NoDDL && dr.Intn(3) == 0 && wctx.Err() == nil {
				if err := s.ddlStep(wctx, round); err != nil && wctx.Err() == nil {
					s.res.fail("tester: %v", err)
					return
				}
			}
		}
		s.lateStop(wctx)
	}()
	faultErr := s.faults(wctx)
	stopWork()
	wg.Wait()
	if s.w.cls != nil && s.w.cls.on[clsXA] {
		s.w.xaCleanup(ctx)
	}
	s.res.Stmts, s.res.Failed = s.w.stmts.Load(), s.w.failed.Load()
	s.res.DDL, s.res.DDLFailed = s.w.ddls.Load(), s.w.ddlFailed.Load()
	if faultErr != nil {
		return faultErr
	}
	if s.sluiceStopped() {
		return s.checkOracle(ctx, false)
	}
	return s.finish(ctx)
}

func (s *seedRun) setup(ctx context.Context) error {
	if s.script == nil {
		if err := s.w.setup(ctx); err != nil {
			return err
		}
		return s.w.setupClasses(ctx)
	}
	for _, q := range append([]string{"CREATE DATABASE {s}", "CREATE TABLE {s}.zz_end (id INT PRIMARY KEY, note VARCHAR(64))"}, s.script.Before...) {
		if _, err := s.e.SrcDB.ExecContext(ctx, strings.ReplaceAll(q, "{s}", s.schema)); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// sluiceStopped records sluice's own exit (one the tester did not cause)
// as a failure, or as a refused DDL when sluice says it is unsupported.
func (s *seedRun) sluiceStopped() bool {
	if !s.sl.exited() {
		return false
	}
	tail := s.sl.tail()
	if s.expect != nil && s.sl.exitErr() != nil && s.expect.pattern.MatchString(tail) {
		s.res.Refusal = s.expect.name
		s.out("sluice stopped as expected for class %s: %s", s.expect.name, tail)
		return true
	}
	// Before a stop class's own refusal: the documented XA stop comes when
	// replication resumes after the copy, which can be before the stop
	// class's statement is reached (seed 2839: a sequence class).
	if s.xaRefused() {
		s.res.Refusal = "xa-between-snapshots"
		s.out("sluice stopped as documented for an XA transaction across the resumed copy's snapshots: %s", tail)
		return true
	}
	if s.expect != nil {
		s.res.fail("sluice stopped (%v), but not with the refusal expected for class %s (/%s/): %s", s.sl.exitErr(), s.expect.name, s.expect.pattern, tail)
		return true
	}
	if strings.Contains(tail, "unsupported DDL") {
		s.res.Refused = true
	}
	s.res.fail("sluice stopped by itself (%v): %s", s.sl.exitErr(), tail)
	return true
}

func (s *seedRun) writeTask() (string, error) {
	r := rand.New(rand.NewSource(s.seed ^ 0x7a5c))
	y := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["%s.*"]}
threads: %d
pool-size: %d
rows-per-chunk: %d
rows-per-statement: %d
dir: %s
incremental:
  worker-count: %d
  batch: %d
  commit-order: %s
  relay-sync: %s
  metrics-addr: "127.0.0.1:0"
`, s.task, s.e.Src.Port, s.e.Dst.Port, s.schema, 1+r.Intn(3), 1+r.Intn(4), 5+r.Intn(40),
		pick(r, []int{0, 0, 1, 7}), filepath.Join(s.dir, "state"),
		pick(r, []int{1, 2, 4, 8, 16}), pick(r, []int{1, 5, 20, 100}), s.order, pick(r, []string{"commit", "interval", "none"}))
	p := filepath.Join(s.dir, "task.yaml")
	return p, os.WriteFile(p, []byte(y), 0o644)
}

// finish lets sluice catch up with the source's last write, stops it with
// SIGTERM and compares the two sides.
func (s *seedRun) finish(ctx context.Context) error {
	if !s.sl.running() {
		if err := s.sl.start(s.restartMode(ctx)); err != nil {
			return err
		}
	}
	// A last replicated write, so the source's final position is one that
	// the applier must pass.
	if _, err := s.e.SrcDB.ExecContext(ctx, "INSERT INTO `"+s.schema+"`.zz_end VALUES (1, 'end')"); err != nil {
		return fmt.Errorf("seed %d: final write: %w", s.seed, err)
	}
	end, err := sourcePos(ctx, s.e.SrcDB)
	if err != nil {
		return err
	}
	if !s.waitApplied(ctx, end) {
		return s.checkOracle(ctx, false)
	}
	if s.expect != nil {
		s.res.fail("class %s: sluice caught up instead of stopping with /%s/", s.expect.name, s.expect.pattern)
	}
	if err := s.sl.stop(time.Minute); err != nil {
		s.res.fail("sluice did not stop cleanly on SIGTERM: %v: %s", err, s.sl.tail())
	}
	diffs, err := compare(ctx, s.e.SrcDB, s.e.DstDB, s.schema, "source", "target")
	if err != nil {
		return fmt.Errorf("seed %d: compare: %w", s.seed, err)
	}
	for _, d := range diffs {
		s.res.fail("%s", d)
	}
	return s.checkOracle(ctx, true)
}

// waitApplied waits until the target's checkpoint reaches end. It fails
// the seed when sluice exits, makes no progress for a minute, or has not
// arrived within cfg.CatchUp.
func (s *seedRun) waitApplied(ctx context.Context, end binlogPos) bool {
	deadline := time.Now().Add(s.cfg.CatchUp)
	var last binlogPos
	lastMove := time.Now()
	for {
		if s.sluiceStopped() {
			return false
		}
		p, _, err := appliedPos(ctx, s.e.DstDB, s.task)
		if err == nil && !p.less(end) {
			s.out("caught up: applied %s, source end %s", p, end)
			return true
		}
		if err == nil && p != last {
			last, lastMove = p, time.Now()
		}
		if time.Since(lastMove) > time.Minute || time.Now().After(deadline) {
			s.res.fail("stall: applied position %s has not reached the source's %s (last move %s ago); sluice log: %s",
				last, end, time.Since(lastMove).Round(time.Second), s.sl.tail())
			return false
		}
		select {
		case <-ctx.Done():
			s.res.fail("interrupted while waiting for catch-up")
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restartAround waits for sluice to apply everything so far, stops it,
// runs the script's Stopped statements and starts the same command again.
func (s *seedRun) restartAround(ctx context.Context) {
	end, err := sourcePos(ctx, s.e.SrcDB)
	if err != nil || !s.waitApplied(ctx, end) {
		return
	}
	if err := s.sl.stop(time.Minute); err != nil {
		s.res.fail("sluice did not stop cleanly on SIGTERM: %v: %s", err, s.sl.tail())
		return
	}
	for _, q := range s.script.Stopped {
		if _, err := s.e.SrcDB.ExecContext(ctx, strings.ReplaceAll(q, "{s}", s.schema)); err != nil {
			s.out("script: %v: %s", err, q)
		}
	}
	if err := s.sl.start("all"); err != nil {
		s.res.fail("restart: %v", err)
	}
}

// restartMode is the mode of a restart: the same --mode all, unless the
// RerunIncremental switch asks for incremental once the copy is done.
func (s *seedRun) restartMode(ctx context.Context) string {
	if s.cfg.Features.RerunIncremental {
		if _, ok, _ := appliedPos(ctx, s.e.DstDB, s.task); ok {
			return "incremental"
		}
	}
	return "all"
}
