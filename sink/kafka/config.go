// Package kafka is the Kafka sink: it turns the decoded replication stream
// into change events (Debezium's JSON envelope, or Canal-JSON) on one topic
// per table, exactly once. Every batch of source transactions is one Kafka
// transaction of an idempotent, transactional producer, and the source
// position after the batch is written in the same transaction to a
// compacted offsets topic, so a consumer reading with read_committed sees
// each source change once, whatever crashes in between. A restarted sink
// takes the transactional id over (which fences the old producer and
// aborts its open transaction), reads the last committed position, and
// resumes from it.
package kafka

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-db/sluice"
)

// Formats of the events.
const (
	FormatDebezium  = "debezium"
	FormatCanalJSON = "canal-json"
)

// Config configures the sink.
type Config struct {
	Brokers []string
	// TopicPrefix names the topics: <prefix>.<db>.<table> for rows,
	// <prefix> for schema changes, <prefix>.sluice-offsets for positions.
	// It is also Debezium's source.name (the logical server name).
	TopicPrefix string
	// Format is FormatDebezium (default) or FormatCanalJSON.
	Format string
	// Task names the task: the transactional id is "sluice-<task>", and
	// the offsets record's key is the task name.
	Task string
	// Schema adds the Kafka Connect schema to every Debezium event
	// ({"schema": ..., "payload": ...}), as Debezium's JsonConverter does
	// with schemas.enable=true.
	Schema bool
	// DecimalHandling is Debezium's decimal.handling.mode: "precise" (its
	// default: the unscaled value's bytes, base64), "string" or "double".
	DecimalHandling string
	// CreateTopics creates missing topics (with Partitions partitions) and
	// the compacted offsets topic; false makes a missing topic an error.
	CreateTopics bool
	Partitions   int32
	// MaxBatchTxns and CommitInterval bound one Kafka transaction: it is
	// committed after this many source transactions, or this long after it
	// began, whichever comes first (and on a clean stop).
	MaxBatchTxns   int
	CommitInterval time.Duration
	// TxnTimeout is the producer's transaction.timeout.ms.
	TxnTimeout time.Duration
	// SnapshotTimeout is the transaction timeout of the initial snapshot,
	// which is one transaction (snapshot.go): it must not exceed the
	// broker's transaction.max.timeout.ms (15 minutes by default).
	SnapshotTimeout time.Duration
	// SASL authenticates the connections (nil: none).
	SASL *SASL
	// TLS encrypts the connections (nil: plaintext).
	TLS *tls.Config
	// Compression of the record batches: none (the default, as Kafka's
	// own producer and so Debezium under Kafka Connect), snappy, lz4,
	// zstd or gzip.
	Compression string
}

// SASL mechanisms the sink speaks.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASL is the sink's SASL login.
type SASL struct {
	Mechanism string // SASLPlain (default), SASLScramSHA256 or SASLScramSHA512
	User      string
	Password  Secret
}

// Secret is a password: it prints as "***", so that a config printed
// whole (%v, %+v) does not show it.
type Secret string

func (Secret) String() string   { return "***" }
func (Secret) GoString() string { return "***" }

// DefaultConfig returns the defaults for a task.
func DefaultConfig(task string) Config {
	return Config{Task: task, Format: FormatDebezium, DecimalHandling: "precise", CreateTopics: true, Partitions: 1,
		MaxBatchTxns: 2000, CommitInterval: 100 * time.Millisecond, TxnTimeout: 2 * time.Minute, SnapshotTimeout: 15 * time.Minute}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "kafka sink", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if len(c.Brokers) == 0 {
		return bad("sink.kafka.brokers is empty", "list the bootstrap brokers, e.g. brokers: [127.0.0.1:9092]")
	}
	for _, b := range c.Brokers {
		if !strings.Contains(b, ":") {
			return bad("broker "+b+" has no port", "write brokers as host:port")
		}
	}
	if c.TopicPrefix == "" || strings.ContainsAny(c.TopicPrefix, " /\\") {
		return bad(fmt.Sprintf("sink.kafka.topic-prefix %q", c.TopicPrefix), "set topic-prefix to a topic name such as dbserver1")
	}
	if c.Task == "" {
		return bad("no task name", "set name: in the task file")
	}
	switch c.Format {
	case FormatDebezium, FormatCanalJSON:
	default:
		return bad(fmt.Sprintf("sink.kafka.format %q", c.Format), "use debezium or canal-json")
	}
	switch c.DecimalHandling {
	case "precise", "string", "double":
	default:
		return bad(fmt.Sprintf("sink.kafka.decimal-handling %q", c.DecimalHandling), "use precise, string or double")
	}
	if c.SASL != nil {
		switch c.SASL.Mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			return bad(fmt.Sprintf("sink.kafka.sasl.mechanism %q", c.SASL.Mechanism), "use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		if c.SASL.User == "" {
			return bad("sink.kafka.sasl.user is empty", "set sasl: {mechanism: PLAIN, user: U, password: ${VAR}}")
		}
	}
	switch c.Compression {
	case "", "none", "snappy", "lz4", "zstd", "gzip":
	default:
		return bad(fmt.Sprintf("sink.kafka.compression %q", c.Compression), "use none, snappy, lz4, zstd or gzip")
	}
	if c.Partitions < 1 || c.MaxBatchTxns < 1 || c.CommitInterval <= 0 || c.TxnTimeout < time.Second {
		return bad("partitions, batch or interval out of range", "use DefaultConfig")
	}
	return nil
}

// TransactionalID is the producer's transactional id: stable per task, so
// a restarted sluice fences the one it replaces.
func (c Config) TransactionalID() string { return "sluice-" + c.Task }

// OffsetsTopic is the compacted topic that holds the task's position.
func (c Config) OffsetsTopic() string { return c.TopicPrefix + ".sluice-offsets" }
