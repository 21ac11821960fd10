package replicate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/sink/kafka"
)

// A Kafka sink task exports the metrics of a task with a target under the
// same names wherever the meaning is the same (stage, lag, binlog
// positions, events, transactions, rows, DDL, reconnects, restarts,
// errors, the relay and its disk), so that the replication dashboard and
// alerts cover it; applied means committed to Kafka. What only Kafka has
// is named sluice_kafka_*. The counters a sink task cannot have (skip,
// replace, missing rows on a target) are left out rather than shown as 0.

// sinkCounters are a sink task's own counters; counter makes a counter of
// the task's last Status (newTaskMetrics).
func sinkCounters(counter func(subsystem, name, help string, v func(*Status) float64) prometheus.Collector) []prometheus.Collector {
	return []prometheus.Collector{
		counter("kafka", "transactions_total", "Kafka transactions the sink committed in this run, each with one or more source transactions and the checkpoint",
			func(s *Status) float64 { return float64(s.KafkaTxns) }),
	}
}

// startMetrics registers the task's metrics (Config.Registerer, or a
// registry of its own served on Config.MetricsAddr) and says where they
// are, for the log.
func (s *SinkTask) startMetrics() (*metrics, string, error) {
	t := s.t
	m, err := newTaskMetrics(t.cfg.Name, t.cfg.Registerer, true)
	if err != nil {
		return nil, "", err
	}
	metOn := "the worker's endpoint"
	switch {
	case t.cfg.Registerer != nil:
	case t.cfg.MetricsAddr != "":
		addr, err := m.serve(t.cfg.MetricsAddr)
		if err != nil {
			m.close()
			return nil, "", err
		}
		t.mu.Lock()
		t.metAddr = addr
		t.mu.Unlock()
		metOn = addr
	default:
		metOn = "none"
	}
	t.mu.Lock()
	t.metOn = metOn
	t.mu.Unlock()
	m.update(s.Status())
	s.mu.Lock()
	s.met = m
	s.mu.Unlock()
	return m, metOn, nil
}

// countError counts an error that made the sink restart from its
// checkpoint. Not setStage's business: a stage may be set again for one
// condition that lasts.
func (s *SinkTask) countError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.met != nil {
		s.met.countError(err)
	}
}

// kafkaErrorClasses are the error classes only a sink task meets; a sink
// task's sluice_errors_total starts each of them at 0.
var kafkaErrorClasses = []errClass{
	{kafka.ErrUnknownTopic, "kafka_unknown_topic"}, {kafka.ErrNotAuthorized, "kafka_not_authorized"}, {kafka.ErrFenced, "kafka_fenced"},
}
