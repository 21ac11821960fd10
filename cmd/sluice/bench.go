package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/bench/oltp"
	"github.com/sluice-db/sluice/bench/report"
)

// benchSubcommands are the children of `sluice bench`. Each benchmark's file
// adds its own in init with registerBench, so that no file has to edit a
// shared list (bench_dtx.go: `func init() { registerBench(newBenchDTXCmd) }`).
var benchSubcommands []func() *cobra.Command

func registerBench(f func() *cobra.Command) { benchSubcommands = append(benchSubcommands, f) }

func init() {
	register(newBenchCmd)
	registerBench(newBenchOLTPCmd)
	registerBench(newBenchCompareCmd)
	registerBench(newBenchReportCmd)
}

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "bench",
		Example: `  sluice bench oltp run --port 3307 --tables 4 --table-size 100000 --threads 16 --time 60 --json out.json
  sluice bench compare before.json after.json --out charts/
  make bench-replication   # the seeds' tables, side by side with the peer`,
		Short: "Benchmarks: sysbench-compatible OLTP, comparisons with charts, and the peers' benchmarks",
		Long: `Benchmarks that measure a MySQL-compatible server or a sluice pipeline and
write results as JSON (bench/report's schema) and Markdown. 'sluice bench
compare A.json B.json' puts two results side by side with SVG charts.`,
	}
	for _, f := range benchSubcommands {
		cmd.AddCommand(f())
	}
	return cmd
}

// secondsFlag is a duration that also accepts a bare number of seconds, as
// sysbench's --time=60 does.
type secondsFlag struct{ d *time.Duration }

func (s secondsFlag) String() string {
	if s.d == nil {
		return "0s"
	}
	return s.d.String()
}

func (s secondsFlag) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		*s.d = time.Duration(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("use a duration such as 60s or 2m, or a number of seconds")
	}
	*s.d = d
	return nil
}

func (secondsFlag) Type() string { return "duration" }

func durationFlag(f *pflag.FlagSet, d *time.Duration, name string, def time.Duration, usage string) {
	*d = def
	f.Var(secondsFlag{d}, name, usage)
}

// oltpFlags are the options shared by prepare, run and cleanup.
type oltpFlags struct {
	conn    oltp.Conn
	dsn     string
	mix     oltp.Mix
	dist    oltp.Dist
	threads []int
	seed    uint64
}

func (o *oltpFlags) add(f *pflag.FlagSet) {
	o.conn, o.mix, o.dist = oltp.DefaultConn(), oltp.DefaultMix(), oltp.DefaultDist()
	f.StringVar(&o.conn.Host, "host", o.conn.Host, "server host (sysbench --mysql-host)")
	f.IntVar(&o.conn.Port, "port", o.conn.Port, "server port")
	f.StringVar(&o.conn.User, "user", o.conn.User, "user")
	f.StringVar(&o.conn.Password, "password", "", "password (env SLUICE_BENCH_PASSWORD when unset)")
	f.StringVar(&o.conn.DB, "db", o.conn.DB, "database holding the sbtest tables")
	f.StringVar(&o.conn.Socket, "socket", "", "unix socket (instead of --host/--port)")
	f.StringVar(&o.dsn, "dsn", "", "user:password@tcp(host:port)/db as printed by sluice sandbox up; overrides the flags above")
	f.IntVar(&o.mix.Tables, "tables", o.mix.Tables, "number of tables sbtest1..N")
	f.IntVar(&o.mix.TableSize, "table-size", o.mix.TableSize, "rows per table")
	f.IntSliceVar(&o.threads, "threads", []int{1}, "comma-separated thread counts to sweep, e.g. 8,16,32,64 (prepare: tables filled in parallel)")
	f.StringVar(&o.dist.Type, "rand-type", o.dist.Type, "id distribution: uniform, gaussian, special or pareto (sysbench 1.0.20 default: special)")
	f.IntVar(&o.dist.SpecIter, "rand-spec-iter", o.dist.SpecIter, "iterations for the gaussian and special distributions")
	f.IntVar(&o.dist.SpecPct, "rand-spec-pct", o.dist.SpecPct, "percentage of the range holding the 'special' values")
	f.IntVar(&o.dist.SpecRes, "rand-spec-res", o.dist.SpecRes, "percentage of draws that are 'special' values")
	f.Float64Var(&o.dist.ParetoH, "rand-pareto-h", o.dist.ParetoH, "shape of the pareto distribution")
	f.Uint64Var(&o.seed, "rand-seed", 0, "random seed; 0 uses the clock")
}

func (o *oltpFlags) resolve() error {
	if o.dsn != "" {
		c, err := o.conn.ParseDSN(o.dsn)
		if err != nil {
			return badFlag(err)
		}
		o.conn = c
	}
	if o.conn.Password == "" {
		o.conn.Password = os.Getenv("SLUICE_BENCH_PASSWORD")
	}
	if err := o.conn.Validate(); err != nil {
		return badFlag(err)
	}
	if err := o.mix.Validate(); err != nil {
		return badFlag(err)
	}
	if err := o.dist.Validate(); err != nil {
		return badFlag(err)
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return nil
}

func badFlag(err error) error {
	return &sluice.Error{Op: "sluice bench", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "see `sluice bench oltp --help`"}
}

func newBenchOLTPCmd() *cobra.Command {
	var o oltpFlags
	cmd := &cobra.Command{
		Use:   "oltp",
		Short: "sysbench-compatible OLTP workloads: prepare, run (thread sweeps), cleanup",
		Long: `The sbtest tables and workloads of sysbench 1.0.20's oltp_*.lua scripts,
with their statement mix, defaults and random distributions, run through
server-side prepared statements. 'run' sweeps --threads and reports QPS,
TPS, p50/p95/p99/max latency (HdrHistogram), errors and reconnects, as JSON
(--json) and Markdown.

Workloads: ` + strings.Join(oltp.Names(), ", "),
		Example: `  sluice bench oltp prepare --port 3307 --tables 4 --table-size 100000 --threads 4
  sluice bench oltp run --port 3307 --tables 4 --table-size 100000 \
      --workload point_select,write_only --threads 8,16,32,64 --time 60s --warmup 10s --json a.json
  sluice bench oltp cleanup --port 3307 --tables 4`,
	}
	o.add(cmd.PersistentFlags())

	prepare := &cobra.Command{
		Use: "prepare",
		Example: `  sluice bench oltp prepare --port 3307 --tables 4 --table-size 100000
  sluice bench oltp prepare --dsn 'bench:${PW}@tcp(db1:3306)/sbtest' --tables 16`,
		Short: "Create the database (if missing) and tables sbtest1..N filled as sysbench does",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.resolve(); err != nil {
				return err
			}
			par := 1
			for _, t := range o.threads {
				par = max(par, t)
			}
			start := time.Now()
			if err := oltp.Prepare(c.Context(), o.conn, o.mix, o.dist, par, o.seed, c.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "prepared %d tables x %d rows in %s in %s\n", o.mix.Tables, o.mix.TableSize, o.conn.DB, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cleanup := &cobra.Command{
		Use:     "cleanup",
		Example: `  sluice bench oltp cleanup --port 3307 --tables 4`,
		Short:   "Drop tables sbtest1..N",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.resolve(); err != nil {
				return err
			}
			return oltp.Cleanup(c.Context(), o.conn, o.mix.Tables, c.OutOrStdout())
		},
	}

	var (
		workloads      []string
		runTime        time.Duration
		warmup         time.Duration
		reportInterval time.Duration
		jsonPath       string
		mdPath         string
		label          string
		ignore         string
		clientIO       string
	)
	run := &cobra.Command{
		Use: "run",
		Example: `  sluice bench oltp run --port 3307 --tables 4 --table-size 100000 --threads 16 --time 60
  sluice bench oltp run --port 3307 --point-selects 0 --json write_only.json --label write_only`,
		Short: "Run workloads at each thread count; print progress, a summary table, and write JSON",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.resolve(); err != nil {
				return err
			}
			ig, err := parseIgnore(ignore)
			if err != nil {
				return badFlag(err)
			}
			cfg := oltp.Config{Conn: o.conn, Mix: o.mix, Dist: o.dist, Workloads: splitList(workloads), Threads: o.threads,
				Time: runTime, Warmup: warmup, ReportInterval: reportInterval, Ignore: ig, Seed: o.seed, Progress: c.ErrOrStderr(), ClientIO: clientIO}
			if err := cfg.Validate(); err != nil {
				return badFlag(err)
			}
			// The driver logs every lost connection to stderr; the run
			// counts them as reconnects instead.
			_ = mysql.SetLogger(log.New(io.Discard, "", 0))
			res := report.NewRun("sluice bench oltp", label)
			runErr := oltp.Run(c.Context(), cfg, res)
			if len(res.Results) == 0 && runErr != nil {
				return runErr
			}
			if res.Finished.IsZero() {
				res.Finished = time.Now().UTC()
				res.Notes = append(res.Notes, "Stopped early: "+oneLineErr(runErr))
			}
			if err := writeRunOutputs(c.OutOrStdout(), res, jsonPath, mdPath); err != nil {
				return err
			}
			return runErr
		},
	}
	rf := run.Flags()
	rf.StringSliceVar(&workloads, "workload", []string{"point_select"}, "comma-separated workloads: "+strings.Join(oltp.Names(), ", "))
	durationFlag(rf, &runTime, "time", 10*time.Second, "measured time per workload and thread count (60s, or 60)")
	durationFlag(rf, &warmup, "warmup", 0, "unmeasured time before each measurement")
	durationFlag(rf, &reportInterval, "report-interval", 5*time.Second, "print a progress line this often (0: never)")
	rf.StringVar(&jsonPath, "json", "", "write the results (bench/report JSON) to this file")
	rf.StringVar(&mdPath, "markdown", "", "write the Markdown report to this file as well as to stdout")
	rf.StringVar(&label, "label", "", "name of this run in comparisons (default: the server version)")
	rf.StringVar(&ignore, "ignore-errors", "1213,1020,1205", "server error numbers counted and skipped instead of ending the run, or 'all' (sysbench --mysql-ignore-errors)")
	rf.StringVar(&clientIO, "client-io", "blocking", "how client threads wait for the server: blocking (an OS thread per thread, like sysbench) or netpoll (Go's poller)")
	m := &o.mix
	rf.IntVar(&m.RangeSize, "range-size", m.RangeSize, "rows per range SELECT")
	rf.IntVar(&m.PointSelects, "point-selects", m.PointSelects, "point SELECTs per transaction (point_select always runs 1)")
	rf.IntVar(&m.SimpleRanges, "simple-ranges", m.SimpleRanges, "simple range SELECTs per transaction")
	rf.IntVar(&m.SumRanges, "sum-ranges", m.SumRanges, "SELECT SUM() ranges per transaction")
	rf.IntVar(&m.OrderRanges, "order-ranges", m.OrderRanges, "SELECT ... ORDER BY ranges per transaction")
	rf.IntVar(&m.DistinctRanges, "distinct-ranges", m.DistinctRanges, "SELECT DISTINCT ranges per transaction")
	rf.IntVar(&m.IndexUpdates, "index-updates", m.IndexUpdates, "UPDATEs of the indexed column k per transaction")
	rf.IntVar(&m.NonIndexUpd, "non-index-updates", m.NonIndexUpd, "UPDATEs of the non-indexed column c per transaction")
	rf.IntVar(&m.DeleteInserts, "delete-inserts", m.DeleteInserts, "DELETE/INSERT pairs per transaction")
	rf.BoolVar(&m.RangeSelects, "range-selects", m.RangeSelects, "run the range SELECTs")
	rf.BoolVar(&m.SkipTrx, "skip-trx", m.SkipTrx, "run in autocommit mode without BEGIN/COMMIT")

	cmd.AddCommand(prepare, run, cleanup)
	return cmd
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func parseIgnore(s string) (oltp.IgnoreSet, error) {
	ig := oltp.IgnoreSet{Codes: map[uint16]bool{}}
	for _, p := range splitList([]string{s}) {
		if strings.EqualFold(p, "all") {
			ig.All = true
			continue
		}
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return ig, fmt.Errorf("invalid --ignore-errors entry %q: use error numbers or 'all'", p)
		}
		ig.Codes[uint16(n)] = true
	}
	return ig, nil
}

func oneLineErr(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// writeRunOutputs prints the Markdown report and writes the files asked for.
func writeRunOutputs(stdout io.Writer, res *report.Run, jsonPath, mdPath string) error {
	if err := report.RunMarkdown(stdout, res); err != nil {
		return err
	}
	if mdPath != "" {
		f, err := os.Create(mdPath)
		if err != nil {
			return &sluice.Error{Op: "write " + mdPath, Err: err, Hint: "check that the directory exists and is writable"}
		}
		err = report.RunMarkdown(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if jsonPath != "" {
		if err := res.Save(jsonPath); err != nil {
			return &sluice.Error{Op: "write " + jsonPath, Err: err, Hint: "check that the directory exists and is writable"}
		}
	}
	return nil
}

func newBenchCompareCmd() *cobra.Command {
	var out, labelA, labelB, metrics, mdPath string
	cmd := &cobra.Command{
		Use:   "compare A.json B.json",
		Short: "Print A and B side by side (version, threads, QPS, p95, % change) and write SVG charts",
		Long: `Reads two results files (from 'sluice bench oltp run --json' or any sluice
benchmark) and prints, per workload, the table of the TiDB sysbench report:
Version, Threads, QPS and 95% latency for A then B, followed by the change of
B against A at each thread count. With --out, writes one SVG per workload
into DIR: QPS and p95 latency against threads, A and B as two lines.`,
		Example: `  sluice bench compare mysql57.json mariadb1011.json --out charts/`,
		Args:    cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := loadRun(args[0])
			if err != nil {
				return err
			}
			b, err := loadRun(args[1])
			if err != nil {
				return err
			}
			if labelA != "" {
				a.Label = labelA
			}
			if labelB != "" {
				b.Label = labelB
			}
			ms, err := parseMetrics(metrics)
			if err != nil {
				return badFlag(err)
			}
			cmp := report.Compare(a, b, ms)
			if err := cmp.Markdown(c.OutOrStdout()); err != nil {
				return err
			}
			if mdPath != "" {
				f, err := os.Create(mdPath)
				if err != nil {
					return &sluice.Error{Op: "write " + mdPath, Err: err, Hint: "check that the directory exists and is writable"}
				}
				err = cmp.Markdown(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
			}
			if out != "" {
				paths, err := cmp.WriteCharts(out)
				if err != nil {
					return &sluice.Error{Op: "write charts to " + out, Err: err, Hint: "check that --out is a writable directory"}
				}
				for _, p := range paths {
					fmt.Fprintf(c.ErrOrStderr(), "wrote %s\n", p)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory for the SVG charts (created if missing)")
	f.StringVar(&labelA, "label-a", "", "name of A in the tables (default: its label or server version)")
	f.StringVar(&labelB, "label-b", "", "name of B")
	f.StringVar(&metrics, "metrics", "qps,p95_ms", "figures to compare: qps, tps, p50_ms, p95_ms, p99_ms, max_ms, errors, or a metrics key")
	f.StringVar(&mdPath, "markdown", "", "also write the Markdown to this file")
	return cmd
}

func loadRun(path string) (*report.Run, error) {
	r, err := report.Load(path)
	if err != nil {
		hint := "pass files written by `sluice bench oltp run --json`"
		if errors.Is(err, os.ErrNotExist) {
			hint = "check the path " + filepath.Clean(path)
		}
		return nil, &sluice.Error{Op: "sluice bench compare", Err: err, Hint: hint}
	}
	return r, nil
}

var knownMetrics = map[string]report.Metric{
	"qps":    report.MetricQPS,
	"tps":    report.MetricTPS,
	"p95_ms": report.MetricP95,
	"p50_ms": {Key: "p50_ms", Header: "50% Latency (ms)", Axis: "p50 latency (ms)", Better: report.LowerIsBetter},
	"p99_ms": {Key: "p99_ms", Header: "99% Latency (ms)", Axis: "p99 latency (ms)", Better: report.LowerIsBetter},
	"max_ms": {Key: "max_ms", Header: "Max Latency (ms)", Axis: "max latency (ms)", Better: report.LowerIsBetter},
	"avg_ms": {Key: "avg_ms", Header: "Avg Latency (ms)", Axis: "avg latency (ms)", Better: report.LowerIsBetter},
	"errors": {Key: "errors", Header: "Errors", Better: report.LowerIsBetter},
}

func parseMetrics(s string) ([]report.Metric, error) {
	var out []report.Metric
	for _, k := range splitList([]string{s}) {
		if m, ok := knownMetrics[k]; ok {
			out = append(out, m)
			continue
		}
		if strings.ContainsAny(k, " |") {
			return nil, fmt.Errorf("invalid --metrics entry %q", k)
		}
		out = append(out, report.Metric{Key: k, Header: k})
	}
	if len(out) == 0 {
		return nil, errors.New("empty --metrics")
	}
	return out, nil
}

func newBenchReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "report RESULTS.json",
		Example: `  sluice bench report results.json`,
		Short:   "Print one results file as Markdown",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := loadRun(args[0])
			if err != nil {
				return err
			}
			return report.RunMarkdown(c.OutOrStdout(), r)
		},
	}
}
