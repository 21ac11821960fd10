package replicate

import (
	"context"
	"time"
)

// openMetrics makes the task's metrics and serves them on MetricsAddr (or
// registers them with the worker's registry) for the whole of Run.
func (t *Task) openMetrics() (*metrics, error) {
	m, err := newMetrics(t.cfg.Name, t.cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if err := m.register(newStageCollector(t.cfg.Name, &t.clocks)); err != nil {
		m.close()
		return nil, err
	}
	metOn := "the worker's endpoint"
	if t.cfg.MetricsAddr != "" && t.cfg.Registerer == nil {
		addr, err := m.serve(t.cfg.MetricsAddr)
		if err != nil {
			m.close()
			return nil, err
		}
		metOn = addr
		t.mu.Lock()
		t.metAddr = addr
		t.mu.Unlock()
	} else if t.cfg.Registerer == nil {
		metOn = "none"
	}
	t.mu.Lock()
	t.met, t.metOn = m, metOn
	t.mu.Unlock()
	return m, nil
}

// whilePaused keeps status.json and the metrics current while the task is
// paused: stage paused, and a lag that grows with the time paused (the
// task reads nothing from the source then, so it counts the source as
// moving on). It returns true when resumed, false when ctx ended.
func (t *Task) whilePaused(ctx context.Context, resumed <-chan struct{}, m *metrics) bool {
	lag := t.Status().LagSeconds
	t.mu.Lock()
	t.pausedAt, t.pausedLag = time.Now(), lag
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.pausedAt = time.Time{}
		t.mu.Unlock()
	}()
	t.setStage(StagePaused, nil)
	t.logf("paused; sluice resume --config continues")
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.statusLoop(pctx, m, t.Status)
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-ctx.Done():
		return false
	case <-resumed:
		return true
	}
}

// pausedLagLocked is the lag of a paused task; t.mu is held.
func (t *Task) pausedLagLocked(now time.Time) (float64, bool) {
	if t.pausedAt.IsZero() {
		return 0, false
	}
	return t.pausedLag + now.Sub(t.pausedAt).Seconds(), true
}
