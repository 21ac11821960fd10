package dtx

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the coordinator's Prometheus series.
type Metrics struct {
	Transactions *prometheus.CounterVec   // mode, outcome
	Branch       *prometheus.HistogramVec // mode, op, result
	Retries      *prometheus.CounterVec   // mode, op
	Stuck        *prometheus.CounterVec   // mode, op
	Claimed      prometheus.Counter
	CommitBatch  prometheus.Histogram
	CommitTime   prometheus.Histogram
	CommitErrors prometheus.Counter
	Purged       prometheus.Counter
	// Phases and SagaTime: the per-saga latency breakdown (trace.go).
	Phases   *prometheus.CounterVec
	SagaTime prometheus.Histogram
	phases   [numPhases]prometheus.Counter

	// branchObs caches Branch's observers by [mode, op, result]: looking a
	// series up by its labels hashes and validates them under a lock, on
	// every branch call.
	branchObs sync.Map
}

// NewMetrics creates the series and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dtx_transactions_total",
			Help: "Global transactions that reached a final status, by mode and outcome (succeed, failed)."}, []string{"mode", "outcome"}),
		Branch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_dtx_branch_duration_seconds",
			Help:    "Branch call latency by mode, op and result (SUCCESS, FAILURE, ONGOING, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"mode", "op", "result"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dtx_branch_retries_total",
			Help: "Branch attempts that must be retried (error or ONGOING), by mode and op."}, []string{"mode", "op"}),
		Stuck: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dtx_branch_stuck_total",
			Help: "Branches that exceeded the retry limit and were marked stuck, by mode and op."}, []string{"mode", "op"}),
		Claimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_dtx_recovery_claimed_total",
			Help: "Transactions claimed by the recovery loop."}),
		CommitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_dtx_store_commit_batch_size",
			Help: "Mutations group-committed per store transaction.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		CommitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_dtx_store_commit_seconds",
			Help: "Store transaction latency.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}),
		CommitErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_dtx_store_commit_errors_total",
			Help: "Store transactions that failed as a whole."}),
		Purged: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_dtx_purged_total",
			Help: "Finished transactions removed after the retention time."}),
	}
	m.Phases, m.phases = newPhaseCounters()
	m.SagaTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_dtx_saga_request_seconds",
		Help:    "Submit read to answer written, of the wait_result sagas that sluice_dtx_saga_phase_seconds_total breaks down.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	if reg != nil {
		reg.MustRegister(m.Transactions, m.Branch, m.Retries, m.Stuck, m.Claimed, m.CommitBatch, m.CommitTime, m.CommitErrors, m.Purged,
			m.Phases, m.SagaTime)
	}
	return m
}

func (m *Metrics) observeCommit(n int, d time.Duration, err error) {
	m.CommitBatch.Observe(float64(n))
	m.CommitTime.Observe(d.Seconds())
	if err != nil {
		m.CommitErrors.Inc()
	}
}

// observeBranch records one branch call's latency.
func (m *Metrics) observeBranch(mode, op, result string, d time.Duration) {
	key := [3]string{mode, op, result}
	o, ok := m.branchObs.Load(key)
	if !ok {
		o, _ = m.branchObs.LoadOrStore(key, m.Branch.WithLabelValues(mode, op, result))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}
