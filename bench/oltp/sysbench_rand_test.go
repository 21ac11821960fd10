package oltp

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// distStats summarises draws from [1, 100000]: the share in the middle 1 %,
// how many distinct ids, how many of the most frequent ids make up half the
// draws (the hot set that decides lock contention), and the mean.
type distStats struct {
	mid, mean       float64
	distinct, hot50 int
}

func summarise(v []int) distStats {
	cnt := map[int]int{}
	mid, sum := 0, 0.0
	for _, x := range v {
		cnt[x]++
		if x >= 49500 && x <= 50501 {
			mid++
		}
		sum += float64(x)
	}
	cs := make([]int, 0, len(cnt))
	for _, c := range cnt {
		cs = append(cs, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(cs)))
	s, k := 0, 0
	for _, c := range cs {
		s += c
		k++
		if 2*s >= len(v) {
			break
		}
	}
	return distStats{mid: float64(mid) / float64(len(v)), mean: sum / float64(len(v)), distinct: len(cnt), hot50: k}
}

// TestDistributionsMatchSysbench draws ids with sysbench's own
// sysbench.rand.default and with Rand.Default, for each --rand-type, and
// compares the shapes. Skipped when sysbench is not installed.
func TestDistributionsMatchSysbench(t *testing.T) {
	bin, err := exec.LookPath("sysbench")
	if err != nil {
		t.Skip("sysbench not installed (make deps installs it)")
	}
	script := filepath.Join(t.TempDir(), "draw.lua")
	if err := os.WriteFile(script, []byte("function event()\n  print(sysbench.rand.default(1, 100000))\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 200000
	for _, typ := range []string{"special", "uniform", "gaussian", "pareto"} {
		out, err := exec.Command(bin, script, "--events="+strconv.Itoa(n), "--threads=1", "--rand-type="+typ, "run").Output()
		if err != nil {
			t.Fatalf("sysbench %s: %v", typ, err)
		}
		var ref []int
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if v, err := strconv.Atoi(sc.Text()); err == nil {
				ref = append(ref, v)
			}
		}
		if len(ref) != n {
			t.Fatalf("sysbench %s printed %d draws, want %d", typ, len(ref), n)
		}
		d := DefaultDist()
		d.Type = typ
		r := NewRand(d, 12345)
		mine := make([]int, n)
		for i := range mine {
			mine[i] = int(r.Default(1, 100000))
		}
		a, b := summarise(ref), summarise(mine)
		near := func(x, y, tol float64) bool { return math.Abs(x-y) <= tol*math.Max(math.Abs(x), 1) }
		if !near(a.mid, b.mid, 0.05) && math.Abs(a.mid-b.mid) > 0.005 || !near(a.mean, b.mean, 0.02) ||
			!near(float64(a.distinct), float64(b.distinct), 0.05) || !near(float64(a.hot50), float64(b.hot50), 0.08) {
			t.Errorf("%s: sysbench %+v, sluice %+v", typ, a, b)
		}
	}
}
