// Package task is the typed form of a sluice task file (YAML). Only cmd/
// reads the file; everything else receives a *Config.
package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/sluice-db/sluice"
)

// Config is a task file.
type Config struct {
	Name   string          `yaml:"name"`
	Source sluice.Endpoint `yaml:"source"`
	Target sluice.Endpoint `yaml:"target"`
	Tables Tables          `yaml:"tables"`
	Routes []Route         `yaml:"routes"`

	Threads          int `yaml:"threads"`            // dump connections
	PoolSize         int `yaml:"pool-size"`          // load connections
	RowsPerChunk     int `yaml:"rows-per-chunk"`     // dump chunk size
	RowsPerStatement int `yaml:"rows-per-statement"` // 0: LOAD DATA; >0: multi-row INSERTs of this many rows

	// Dir holds the task's state (relay log, dump files). Default: ./sluice-<name>.
	Dir string `yaml:"dir"`

	// Incremental holds the replication settings (issue: incremental replication).
	Incremental Incremental `yaml:"incremental"`

	// Serve configures the binlog service (sluice serve).
	Serve Serve `yaml:"serve"`

	// Sources, instead of source:, lists the sources whose binlogs sluice
	// serve merges into one global binlog (sources.go).
	Sources []Source `yaml:"sources"`

	// Sink sends the changes somewhere that is not a database, instead of
	// target: (docs/manual/kafka.md).
	Sink Sink `yaml:"sink"`

	// path is where the file was read from, for relative paths.
	path string
	// present are the top-level keys the file sets (Require).
	present map[string]bool
}

// Incremental configures replication after (or without) the full copy.
type Incremental struct {
	// Start position for --mode incremental: a GTID set, or file/pos.
	GTIDSet     string `yaml:"gtid-set"`
	BinlogFile  string `yaml:"binlog-file"`
	BinlogPos   uint32 `yaml:"binlog-pos"`
	WorkerCount int    `yaml:"worker-count"`
	Batch       int    `yaml:"batch"`
	ServerID    uint32 `yaml:"server-id"`
	// MetricsAddr is the loopback address of the Prometheus endpoint.
	MetricsAddr string `yaml:"metrics-addr"`
	// RelaySync is the relay fsync policy: "commit" (every transaction), "interval", "none".
	RelaySync string `yaml:"relay-sync"`
	// RelayRetain is how long applied relay files are kept, e.g. "24h".
	RelayRetain string `yaml:"relay-retain"`
	// Flavor is "mariadb" or "mysql"; empty means detect.
	Flavor string `yaml:"flavor"`
	// CommitOrder is "source" (the default: target transactions commit in
	// source order) or "relaxed" (groups that do not conflict may commit
	// out of source order; see docs/manual/apply.md).
	CommitOrder string `yaml:"commit-order"`
	// OnMissingRow is what a replicated UPDATE or DELETE that matches no
	// target row does: "stop" (the default: the task stops with an error
	// naming the table, key and source transaction, and nothing of that
	// transaction is committed) or "skip" (the transaction commits without
	// it, and sluice_apply_missing_rows_total counts it).
	OnMissingRow string `yaml:"on-missing-row"`
	// OnlineDDL names the online schema change tool run on the source:
	// "gh-ost" or "pt-osc" make sluice keep that tool's helper tables off
	// the target and run its ALTER on the real table at the cut-over;
	// "none" (the default) replicates every table as it is, whatever its
	// name (docs/manual/replication.md).
	OnlineDDL string `yaml:"online-ddl"`
}

// Serve configures sluice serve, which serves the relay log over the
// MySQL replication protocol.
type Serve struct {
	// Listen is the address, loopback by default.
	Listen string `yaml:"listen"`
	// ServerID is the service's server id; replicas must use others.
	ServerID uint32 `yaml:"server-id"`
	// Users may connect; each needs a password (${VAR} works).
	Users []ServeUser `yaml:"users"`
	// TLSCert and TLSKey are PEM files; with them clients may switch to
	// TLS, and with RequireTLS they must.
	TLSCert    string `yaml:"tls-cert"`
	TLSKey     string `yaml:"tls-key"`
	RequireTLS bool   `yaml:"require-tls"`
	// PurgeInterval is how often relay files that no connected replica
	// reads and that are older than incremental.relay-retain are removed.
	PurgeInterval string `yaml:"purge-interval"`
	// MaxBinlogSize is the size at which the global binlog of sources:
	// starts a new file (default 256 MiB).
	MaxBinlogSize int64 `yaml:"max-binlog-size"`
	// MergeMemory bounds the bytes of one source's transactions that wait
	// in memory to be merged into the global binlog (default 32 MiB); the
	// rest wait in temporary files in the task's dir.
	MergeMemory int64 `yaml:"merge-memory"`
	// Retain bounds the served relay log by age and size; a file a
	// connected replica reads is kept regardless.
	Retain ServeRetain `yaml:"retain"`
}

// ServeRetain is serve.retain: files older than Age, and the oldest files
// while the relay is larger than Size, are purged. Age defaults to
// incremental.relay-retain (24h); Size to no bound.
type ServeRetain struct {
	Age  string `yaml:"age"`
	Size string `yaml:"size"`
}

// RetainBytes is serve.retain.size in bytes (0: no bound).
func (r ServeRetain) RetainBytes() (int64, error) {
	if r.Size == "" {
		return 0, nil
	}
	return ParseBytes(r.Size)
}

// ParseBytes reads a size: a number of bytes, or one with a unit K, M, G
// or T (powers of 1024; KB/KiB, MB/MiB ... mean the same).
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = strings.TrimSpace(t[:n-1])
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: not a number of bytes or a size such as 500M or 10G", s)
	}
	return v * mult, nil
}

// Sink is a non-database destination; one of its fields is set.
type Sink struct {
	Kafka *KafkaSink `yaml:"kafka"`
}

// KafkaSink is sink: {kafka: ...}: change events on Kafka, exactly once.
type KafkaSink struct {
	Brokers     []string `yaml:"brokers"`
	TopicPrefix string   `yaml:"topic-prefix"`
	// Format is debezium (the default) or canal-json.
	Format string `yaml:"format"`
	// Schema adds the Kafka Connect schema to each Debezium event.
	Schema bool `yaml:"schema"`
	// DecimalHandling is Debezium's decimal.handling.mode: precise (default), string, double.
	DecimalHandling string `yaml:"decimal-handling"`
	// CreateTopics creates missing topics (default true).
	CreateTopics *bool `yaml:"create-topics"`
	// Partitions of the topics the sink creates (default 1).
	Partitions int32 `yaml:"partitions"`
	// SASL logs in to the brokers (none when absent).
	SASL *KafkaSASL `yaml:"sasl"`
	// TLS encrypts the connections to the brokers (none when absent):
	// mode verify-identity (the default), verify-ca or required; ca is the
	// CA that signed the brokers' certificates (default: the system's),
	// cert and key a client certificate (ssl.client.auth).
	TLS *sluice.TLS `yaml:"tls"`
	// Compression of the record batches: none (default), snappy, lz4,
	// zstd or gzip.
	Compression string `yaml:"compression"`
}

// KafkaSASL is sink.kafka.sasl: the SASL login of the Kafka sink.
type KafkaSASL struct {
	// Mechanism is PLAIN (the default), SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	// Password may be ${VAR}, read from the environment.
	Password string `yaml:"password"`
}

// HasSink reports whether the task writes to a sink instead of a target.
func (c *Config) HasSink() bool { return c.Sink.Kafka != nil }

// ServeUser is one account of the binlog service.
type ServeUser struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// Tables selects tables by "schema.table" glob patterns (* and ?).
type Tables struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// Route renames a schema and/or table on the way to the target. Schema and
// Table are glob patterns on the source names; an empty TargetTable keeps the
// table name.
type Route struct {
	Schema       string `yaml:"schema"`
	Table        string `yaml:"table"`
	TargetSchema string `yaml:"target-schema"`
	TargetTable  string `yaml:"target-table"`
}

// Default returns a Config with every default filled in.
func Default() *Config {
	return &Config{
		Name:         "task",
		Source:       sluice.Endpoint{Host: "127.0.0.1", Port: 3306, User: "root"},
		Target:       sluice.Endpoint{Host: "127.0.0.1", Port: 3306, User: "root"},
		Threads:      4,
		PoolSize:     8,
		RowsPerChunk: 50000,
		Incremental:  Incremental{WorkerCount: 16, Batch: 100, RelaySync: "interval", RelayRetain: "24h", MetricsAddr: "127.0.0.1:0"},
		Serve:        Serve{Listen: "127.0.0.1:3310", PurgeInterval: "1m"},
	}
}

// Load reads and validates a task file. Unknown keys are errors, so a typo
// never silently falls back to a default.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &sluice.Error{Op: "read task file", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "pass an existing YAML file with --config"}
	}
	c, err := Parse(b)
	if err != nil {
		return nil, err
	}
	c.path = path
	if c.Dir == "" {
		c.Dir = filepath.Join(filepath.Dir(path), "sluice-"+c.Name)
	} else if !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(filepath.Dir(path), c.Dir)
	}
	return c, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces each ${VAR} in s from the environment; unset names
// the first variable that is not set.
func expandEnv(s string) (out, unset string) {
	out = envRef.ReplaceAllStringFunc(s, func(m string) string {
		name := envRef.FindStringSubmatch(m)[1]
		v, ok := os.LookupEnv(name)
		if !ok && unset == "" {
			unset = name
		}
		return v
	})
	return out, unset
}

// Parse decodes YAML into a Config on top of the defaults and validates it.
// ${VAR} in a password is replaced from the environment, so secrets need not
// sit in the file.
func Parse(b []byte) (*Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, &sluice.Error{Op: "parse task file", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, yamlMsg(err)), Hint: "fix the YAML; see docs/manual/taskfile.md for the keys"}
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err == nil {
		c.present = map[string]bool{}
		for k := range top {
			c.present[k] = true
		}
	}
	if !c.present["name"] {
		return nil, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: name: is missing", sluice.ErrConfig),
			Hint: "add name: <word>; it names the task's checkpoints on the target, so keep it once chosen"}
	}
	for role, ep := range map[string]*sluice.Endpoint{"source": &c.Source, "target": &c.Target} {
		var unset string
		ep.Password, unset = expandEnv(ep.Password)
		if unset != "" {
			return nil, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s.password: ${%s} is not set in the environment", sluice.ErrConfig, role, unset),
				Hint: "export " + unset + " before running sluice (an empty value must be set explicitly: export " + unset + "=)"}
		}
	}
	for i := range c.Serve.Users {
		u := &c.Serve.Users[i]
		var unset string
		u.Password, unset = expandEnv(u.Password)
		if unset != "" {
			return nil, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: serve.users[%d].password: ${%s} is not set in the environment", sluice.ErrConfig, i, unset),
				Hint: "export " + unset + " before running sluice"}
		}
	}
	if k := c.Sink.Kafka; k != nil && k.SASL != nil {
		var unset string
		if k.SASL.Password, unset = expandEnv(k.SASL.Password); unset != "" {
			return nil, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: sink.kafka.sasl.password: ${%s} is not set in the environment", sluice.ErrConfig, unset),
				Hint: "export " + unset + " before running sluice"}
		}
	}
	if err := c.expandSources(); err != nil {
		return nil, err
	}
	if c.present["serve"] && !c.present["target"] && !c.present["tables"] {
		// A pure binlog server serves the whole binlog.
		c.Tables.Include = []string{"*.*"}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func yamlMsg(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Require fails unless the task file sets each of the named top-level
// sections ("source", "target"): a command that reads the source or writes
// to a target never falls back to a default server (127.0.0.1:3306).
// A Config not read from a file (Default) has every section.
// Has reports whether the task file has the section (false for a Config
// built in code).
func (c *Config) Has(section string) bool { return c.present[section] }

func (c *Config) Require(sections ...string) error {
	if c.present == nil {
		return nil
	}
	for _, k := range sections {
		if !c.present[k] {
			hint := "add " + k + ": {host: ..., port: ..., user: ..., password: ${VAR}} to the task file"
			if k == "serve" { // not an endpoint: it told serve to add host and port
				hint = "add serve: {listen: 127.0.0.1:3310, server-id: N, users: [{user: U, password: ${VAR}}]} to the task file"
			}
			return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s: is missing", sluice.ErrConfig, k), Hint: hint}
		}
	}
	return nil
}

// MaxNameLen is the longest schema or table name MySQL and MariaDB take,
// in characters.
const MaxNameLen = 64

// CheckName refuses a name the target could not create, so that a route
// to it fails before the copy creates any table, not after.
func CheckName(field, name string) error {
	if n := utf8.RuneCountInString(name); n > MaxNameLen {
		return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s %q is %d characters; the server takes at most %d", sluice.ErrConfig, field, name, n, MaxNameLen),
			Hint: fmt.Sprintf("route to a name of at most %d characters", MaxNameLen)}
	}
	if strings.HasSuffix(name, " ") {
		return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s %q ends with a space, which the server refuses", sluice.ErrConfig, field, name),
			Hint: "route to a name without trailing spaces"}
	}
	return nil
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// Path is the file the task was loaded from ("" when parsed from bytes).
func (c *Config) Path() string { return c.path }
