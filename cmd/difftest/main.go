// Command difftest runs sluice's randomized differential tester: for each
// seed, a generated schema and workload on a source sandbox while `sluice
// migrate --mode all` replicates it to a target sandbox, with kill -9 and
// target restarts, then an independent comparison of the two sides. It
// prints one line per seed, then "N passed, M failed" and the failing
// seeds, and exits 1 when any seed failed. See docs/manual/difftest.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-db/sluice/internal/difftest"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg := difftest.DefaultConfig()
	seeds := flag.Int("seeds", 10, "number of seeds to run")
	first := flag.Int64("seed", 1, "first seed; seeds run from it upwards")
	list := flag.String("seed-list", "", "comma-separated seeds to run instead of -seed/-seeds")
	dir := flag.String("dir", "", "work directory for task dirs and logs of failing seeds (default: a temp dir)")
	bin := flag.String("sluice", "", "sluice binary under test (default: go build ./cmd/sluice)")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "workload time per seed")
	flag.DurationVar(&cfg.CatchUp, "catch-up", cfg.CatchUp, "bound on the final catch-up wait")
	flag.StringVar(&cfg.Order, "order", "", "commit order: source, relaxed, or empty to alternate by seed")
	flag.BoolVar(&cfg.Verbose, "v", false, "print every DDL statement")
	flag.BoolVar(&cfg.Oracle, "oracle", cfg.Oracle, "also compare the target with a stock MariaDB replica of the source (the native-replica oracle)")
	hold := flag.Bool("hold", false, "after a failing seed, keep both servers running until interrupted (to inspect them)")
	cfg.Features.BindFlags(flag.CommandLine)
	flag.Parse()
	cfg.Out = os.Stdout

	var run []int64
	if *list != "" {
		for _, s := range strings.Split(*list, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				fmt.Fprintf(os.Stderr, "difftest: bad seed %q in -seed-list\n", s)
				return 2
			}
			run = append(run, n)
		}
	} else {
		for i := 0; i < *seeds; i++ {
			run = append(run, *first+int64(i))
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *dir == "" {
		d, err := os.MkdirTemp("", "difftest")
		if err != nil {
			fmt.Fprintln(os.Stderr, "difftest:", err)
			return 2
		}
		*dir = d
	}
	if *bin == "" {
		b, err := difftest.Build(ctx, *dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "difftest:", err)
			return 2
		}
		*bin = b
	}
	env, err := difftest.NewEnv(*bin, *dir, cfg.Oracle)
	if err != nil {
		fmt.Fprintln(os.Stderr, "difftest:", err, "(is mariadb-server installed? run 'make deps')")
		return 2
	}
	defer env.Close()
	fmt.Printf("difftest: %d seeds, %s each, work dir %s\n", len(run), cfg.Duration, *dir)
	var failed []string
	passed, kills, restarts, oracleDiffs := 0, 0, 0, 0
	for _, seed := range run {
		if ctx.Err() != nil {
			break
		}
		res, err := difftest.Run(ctx, env, cfg, seed)
		if err != nil {
			fmt.Printf("seed %d: tester error: %v\n", seed, err)
			failed = append(failed, strconv.FormatInt(seed, 10))
			continue
		}
		fmt.Println(res.Summary())
		for _, d := range res.OracleDiffs {
			fmt.Printf("  seed %d: oracle: %s\n", seed, d)
		}
		if len(res.OracleDiffs) > 0 {
			oracleDiffs++
		}
		if res.Pass {
			passed++
			kills += res.Kills
			restarts += res.TargetRestarts
			continue
		}
		failed = append(failed, strconv.FormatInt(seed, 10))
		for _, p := range res.Problems {
			fmt.Printf("  seed %d: %s\n", seed, p)
		}
		fmt.Printf("  seed %d: task dir and sluice.log: %s\n", seed, res.Dir)
		if *hold {
			fmt.Printf("  seed %d: servers held: source %s, target %s (as in the task file); interrupt to go on\n",
				seed, env.Src.Endpoint(), env.Dst.Endpoint())
			<-ctx.Done()
		}
	}
	fmt.Printf("passing seeds survived %d kill -9 and %d target restarts\n", kills, restarts)
	if oracleDiffs > 0 {
		fmt.Printf("%d seeds where the native replica itself differed from the source or could not be compared (lines \"oracle:\")\n", oracleDiffs)
	}
	fmt.Printf("%d passed, %d failed\n", passed, len(failed))
	if len(failed) > 0 {
		fmt.Printf("failing seeds: %s\n", strings.Join(failed, ","))
		return 1
	}
	return 0
}
