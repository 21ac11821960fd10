package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/schema"
)

// The package's tests share one source and one target server; each test
// uses its own databases and task name.
var (
	srcInst, dstInst *sandbox.Instance
)

func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_APPLY_CHILD") != "" {
		os.Exit(childMain())
	}
	var stops []func()
	code := func() int {
		if sandboxtest.Short() {
			return m.Run() // make test-unit: the tests that need the servers skip
		}
		var err error
		var stop func()
		if srcInst, stop, err = sandboxtest.New("src"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stops = append(stops, stop)
		if dstInst, stop, err = sandboxtest.New("dst"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stops = append(stops, stop)
		return m.Run()
	}()
	for _, s := range stops {
		s()
	}
	os.Exit(code)
}

// sourcePos is the source's current end: the position replication of the
// next transaction starts from.
func sourcePos(tb testing.TB, db *sql.DB) sluice.Position {
	tb.Helper()
	var p sluice.Position
	var pos uint64
	var x1, x2 any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&p.File, &pos, &x1, &x2); err != nil {
		tb.Fatal(err)
	}
	p.Pos = uint32(pos)
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p.GTIDSet); err != nil {
		tb.Fatal(err)
	}
	p.Flavor = "mariadb"
	return p
}

type runOpts struct {
	task    string
	workers int
	batch   int
	// maxBatch: MaxBatch and ChainBatch, 0: the defaults.
	maxBatch int
	large    int // LargeTxnBytes, 0: default
	relaxed  bool
	missing  string           // OnMissingRow, "": the default
	target   *sluice.Endpoint // nil: dstInst
	// started is called after Start with the applier's first stats.
	started func(apply.Stats)
	keep    func(sluice.TableRef) bool
	route   func(sluice.TableRef) sluice.TableRef
	until   sluice.Position
	// after is called after each submitted item; returning true stops the
	// run abruptly (Close without Flush), as a crash would.
	after func(a *apply.Applier) bool
}

func applierConfig(o runOpts) apply.Config {
	cfg := apply.DefaultConfig()
	cfg.Task = o.task
	if o.workers > 0 {
		cfg.Workers = o.workers
	}
	if o.batch > 0 {
		cfg.Batch = o.batch
	}
	if o.maxBatch > 0 {
		cfg.MaxBatch, cfg.ChainBatch = o.maxBatch, o.maxBatch
	}
	cfg.RelaxedOrder = o.relaxed
	if o.missing != "" {
		cfg.OnMissingRow = o.missing
	}
	if o.large > 0 {
		cfg.LargeTxnBytes = o.large
		if cfg.BatchBytes > o.large {
			cfg.BatchBytes = o.large
		}
	}
	return cfg
}

// seed records the source's current position as the task's start.
func seed(tb testing.TB, task string, srcDB *sql.DB) sluice.Position {
	tb.Helper()
	ctx := context.Background()
	db, err := apply.OpenTarget(ctx, dstInst.Endpoint(), 1)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	a, err := apply.New(applierConfig(runOpts{task: task}), db)
	if err != nil {
		tb.Fatal(err)
	}
	p := sourcePos(tb, srcDB)
	if err := a.Seed(ctx, p, nil); err != nil {
		tb.Fatal(err)
	}
	return p
}

func after(p, until sluice.Position) bool { return p.Compare(until) >= 0 }

// replicate runs source -> decode -> apply for a task from its checkpoint
// until the source position o.until is applied, like the orchestrator does
// (without the relay log): it is the wiring the lead's command uses.
func replicate(ctx context.Context, src *sandbox.Instance, o runOpts) (apply.Stats, error) {
	ep := dstInst.Endpoint()
	if o.target != nil {
		ep = *o.target
	}
	db, err := apply.OpenTarget(ctx, ep, applierConfig(o).Workers)
	if err != nil {
		return apply.Stats{}, err
	}
	defer db.Close()
	a, err := apply.New(applierConfig(o), db)
	if err != nil {
		return apply.Stats{}, err
	}
	// Start first: it waits for a killed predecessor's sessions to end, so
	// the checkpoint read next is final.
	if err := a.Start(ctx); err != nil {
		return apply.Stats{}, err
	}
	defer a.Close()
	if o.started != nil {
		o.started(a.Stats())
	}
	start, ok, err := a.Checkpoint(ctx)
	if err != nil {
		return apply.Stats{}, err
	}
	if !ok {
		return apply.Stats{}, fmt.Errorf("task %s has no checkpoint", o.task)
	}
	tracker := schema.NewTracker()
	state, err := a.SchemaState(ctx)
	if err != nil {
		return apply.Stats{}, err
	}
	if state != nil {
		if err := tracker.Restore(state); err != nil {
			return apply.Stats{}, err
		}
	}
	dcfg := decode.DefaultConfig()
	dcfg.GTIDPos, dcfg.Selected, dcfg.Route = start.GTIDSet, o.keep, o.route
	if o.route != nil {
		dcfg.RouteSchema = func(s string) string { return o.route(sluice.TableRef{Schema: s}).Schema }
	}
	if o.keep != nil {
		dcfg.SchemaSelected = func(s string) bool { return o.keep(sluice.TableRef{Schema: s, Name: "*"}) }
	}
	dec, err := decode.New(dcfg, tracker)
	if err != nil {
		return apply.Stats{}, err
	}
	syncer := newSyncer(src)
	defer syncer.Close()
	if after(start, o.until) {
		return a.Stats(), nil
	}
	streamer, err := syncer.StartSync(gmysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		return apply.Stats{}, err
	}
	cur := sluice.Position{File: start.File, Pos: start.Pos}
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			return a.Stats(), err
		}
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			cur.File = string(r.NextLogName)
			continue
		}
		if ev.Header.LogPos == 0 || ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 {
			continue
		}
		cur.Pos = ev.Header.LogPos
		items, err := dec.Feed(ev, cur)
		if err != nil {
			// Pause: everything before the failing event is applied, nothing of it.
			if ferr := a.Flush(ctx); ferr != nil {
				return a.Stats(), ferr
			}
			return a.Stats(), err
		}
		for _, it := range items {
			if err := a.Submit(ctx, it); err != nil {
				return a.Stats(), err
			}
			if o.after != nil && o.after(a) {
				st := a.Stats()
				return st, errCrashed
			}
		}
		if after(cur, o.until) {
			break
		}
	}
	if err := a.Flush(ctx); err != nil {
		return a.Stats(), err
	}
	st := a.Stats()
	return st, a.Close()
}

var errCrashed = fmt.Errorf("simulated crash")

// dump returns a table's rows as sorted text, for comparing source and target.
func dump(tb testing.TB, db *sql.DB, table string) []string {
	tb.Helper()
	rows, err := db.Query("SELECT * FROM " + table)
	if err != nil {
		tb.Fatalf("dump %s: %v", table, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = "NULL"
			} else {
				parts[i] = strconv.Quote(string(v))
			}
		}
		out = append(out, strings.Join(parts, ","))
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func sameTables(tb testing.TB, src, dst *sql.DB, tables ...string) {
	tb.Helper()
	for _, tbl := range tables {
		a, b := dump(tb, src, tbl), dump(tb, dst, tbl)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			n := 0
			for i := 0; i < len(a) || i < len(b); i++ {
				var x, y string
				if i < len(a) {
					x = a[i]
				}
				if i < len(b) {
					y = b[i]
				}
				if x != y && n < 5 {
					tb.Errorf("%s row %d: source %s, target %s", tbl, i, x, y)
					n++
				}
			}
			tb.Fatalf("%s differs: source %d rows, target %d rows", tbl, len(a), len(b))
		}
	}
}
