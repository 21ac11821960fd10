package oltp

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Dist is a random number distribution for row ids, as sysbench's
// --rand-type: uniform, gaussian, special (sysbench 1.0.20's default) or
// pareto. The parameters default to sysbench's.
type Dist struct {
	Type     string  // uniform | gaussian | special | pareto
	SpecIter int     // --rand-spec-iter: 12
	SpecPct  int     // --rand-spec-pct: 1
	SpecRes  int     // --rand-spec-res: 75
	ParetoH  float64 // --rand-pareto-h: 0.2
}

// DefaultDist is sysbench 1.0.20's default: --rand-type=special with
// --rand-spec-iter=12 --rand-spec-pct=1 --rand-spec-res=75.
func DefaultDist() Dist {
	return Dist{Type: "special", SpecIter: 12, SpecPct: 1, SpecRes: 75, ParetoH: 0.2}
}

// Validate checks the distribution's name and parameters.
func (d Dist) Validate() error {
	switch d.Type {
	case "uniform", "gaussian", "special", "pareto":
	default:
		return fmt.Errorf("invalid --rand-type %q: use uniform, gaussian, special or pareto", d.Type)
	}
	if d.SpecIter < 1 {
		return fmt.Errorf("invalid --rand-spec-iter %d: use 1 or more", d.SpecIter)
	}
	if d.SpecPct < 0 || d.SpecPct > 100 {
		return fmt.Errorf("invalid --rand-spec-pct %d: use 0 to 100", d.SpecPct)
	}
	if d.SpecRes < 0 || d.SpecRes >= 100 {
		return fmt.Errorf("invalid --rand-spec-res %d: use 0 to 99", d.SpecRes)
	}
	if d.ParetoH <= 0 || d.ParetoH >= 1 {
		return fmt.Errorf("invalid --rand-pareto-h %v: use a value between 0 and 1", d.ParetoH)
	}
	return nil
}

// Rand is one worker's generator: sysbench.rand.default (the configured
// distribution), sysbench.rand.uniform and sysbench.rand.string. Not safe for
// concurrent use.
type Rand struct {
	r    *rand.Rand
	dist Dist
	// precomputed as sysbench does
	iterMult, pctMult, pct2Mult, resMult, paretoPower float64
}

// NewRand returns a generator seeded with seed.
func NewRand(d Dist, seed uint64) *Rand {
	r := &Rand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), dist: d}
	if d.SpecIter < 1 {
		d.SpecIter = 1
	}
	r.iterMult = 1 / float64(d.SpecIter)
	r.pctMult = float64(d.SpecPct) / 100
	r.pct2Mult = float64(d.SpecPct) / 200
	r.resMult = 100 / (100 - float64(d.SpecRes))
	if d.ParetoH > 0 && d.ParetoH < 1 {
		r.paretoPower = math.Log(d.ParetoH) / math.Log(1-d.ParetoH)
	}
	return r
}

// Default draws from [a, b] with the configured distribution.
func (r *Rand) Default(a, b uint32) uint32 {
	switch r.dist.Type {
	case "uniform":
		return r.Uniform(a, b)
	case "gaussian":
		return r.Gaussian(a, b)
	case "pareto":
		return r.Pareto(a, b)
	}
	return r.Special(a, b)
}

// Uniform draws uniformly from [a, b].
func (r *Rand) Uniform(a, b uint32) uint32 {
	return a + uint32(r.r.Float64()*float64(b-a+1))
}

// Gaussian averages SpecIter uniform draws over [a, b] (an approximate normal
// distribution centred on the middle of the range).
func (r *Rand) Gaussian(a, b uint32) uint32 {
	t := float64(b - a + 1)
	sum := 0.0
	for i := 0; i < r.dist.SpecIter; i++ {
		sum += r.r.Float64() * t
	}
	return a + uint32(sum*r.iterMult)
}

// Special is sysbench's "special" distribution: SpecRes percent of the draws
// fall uniformly into the SpecPct percent of [a, b] around its middle, the
// rest are gaussian over the whole range.
func (r *Rand) Special(a, b uint32) uint32 {
	t := float64(b - a)
	rnd := r.r.Float64()
	if rnd*t*r.resMult < t {
		sum := 0.0
		for i := 0; i < r.dist.SpecIter; i++ {
			sum += r.r.Float64()
		}
		return a + uint32(sum*t*r.iterMult)
	}
	d := t * r.pctMult
	res := rnd*(d+1) + t/2 - t*r.pct2Mult
	return a + uint32(res)
}

// Pareto draws from [a, b] with a Pareto distribution of shape ParetoH.
func (r *Rand) Pareto(a, b uint32) uint32 {
	return a + uint32(float64(b-a+1)*math.Pow(r.r.Float64(), r.paretoPower))
}

// String fills a template as sysbench.rand.string does: every '#' becomes a
// random digit, every '@' a random lower-case letter, anything else is kept.
func (r *Rand) String(template string) string {
	buf := make([]byte, len(template))
	for i := 0; i < len(template); i++ {
		switch template[i] {
		case '#':
			buf[i] = byte('0' + r.r.IntN(10))
		case '@':
			buf[i] = byte('a' + r.r.IntN(26))
		default:
			buf[i] = template[i]
		}
	}
	return string(buf)
}

// The c and pad templates of oltp_common.lua: 11-digit groups joined by '-'.
const (
	cTemplate   = "###########-###########-###########-###########-###########-###########-###########-###########-###########-###########" // 10 groups, 119 chars
	padTemplate = "###########-###########-###########-###########-###########"                                                             // 5 groups, 59 chars
)
