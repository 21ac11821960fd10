package console

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"
)

// history keeps an hour of each task's lag and rate, sampled by the
// console while it runs, for the sparklines, and the stage changes it saw,
// for the timeline.
type history struct {
	mu   sync.Mutex
	keep time.Duration
	m    map[string]*series
}

type point struct {
	at        time.Time
	lag, rate float64
}

type stageChange struct {
	At    time.Time
	Stage string
}

type series struct {
	points []point
	stages []stageChange
}

func newHistory(keep time.Duration) *history {
	return &history{keep: keep, m: map[string]*series{}}
}

// observe records the tasks' figures; a task sampled less than minGap ago
// is not sampled again (page loads sample too).
func (h *history) observe(ts []Task, minGap time.Duration) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range ts {
		s := h.m[t.Dir]
		if s == nil {
			s = &series{}
			h.m[t.Dir] = s
		}
		if n := len(s.stages); n == 0 || s.stages[n-1].Stage != t.Stage {
			s.stages = append(s.stages, stageChange{At: now, Stage: t.Stage})
			if len(s.stages) > 50 {
				s.stages = s.stages[len(s.stages)-50:]
			}
		}
		if n := len(s.points); n > 0 && now.Sub(s.points[n-1].at) < max(minGap/2, time.Second) {
			continue
		}
		s.points = append(s.points, point{at: now, lag: t.Lag, rate: t.TxnsPS})
		i := 0
		for i < len(s.points) && now.Sub(s.points[i].at) > h.keep {
			i++
		}
		s.points = s.points[i:]
	}
}

func (h *history) series(dir string) (lags, rates []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.m[dir]
	if s == nil {
		return nil, nil
	}
	for _, p := range s.points {
		lags = append(lags, p.lag)
		rates = append(rates, p.rate)
	}
	return lags, rates
}

func (h *history) timeline(dir string) []stageChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.m[dir]; s != nil {
		return append([]stageChange(nil), s.stages...)
	}
	return nil
}

// sampleLoop samples every task each SampleEvery until ctx ends.
func (s *Server) sampleLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	for {
		ts, _ := s.scanTasks()
		s.hist.observe(ts, s.cfg.SampleEvery)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sparkline draws vs as a small inline SVG line (no script, no style
// attribute: the page's CSP allows neither inline).
func sparkline(vs []float64, label string) template.HTML {
	const w, h = 90.0, 18.0
	if len(vs) < 2 {
		return template.HTML(`<span class="muted">-</span>`)
	}
	hi := 0.0
	for _, v := range vs {
		hi = max(hi, v)
	}
	var b strings.Builder
	for i, v := range vs {
		y := h - 1
		if hi > 0 {
			y = h - 1 - (h-2)*v/hi
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", w*float64(i)/float64(len(vs)-1), y)
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" width="90" height="18" viewBox="0 0 90 18" role="img" aria-label="%s, last hour, max %.1f"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="%s"/></svg>`,
		template.HTMLEscapeString(label), hi, b.String()))
}
