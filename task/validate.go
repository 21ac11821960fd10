package task

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/fence"
)

// Validate checks every field and names the one that is wrong. The
// sections are checked in the file's order of importance, one function
// each; the first wrong field is the error.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validateEndpoints,
		c.validateSources, // sources.go
		c.validateName,
		c.validateTables,
		c.validateRoutes,
		c.validateCopy,
		c.validateIncremental,
		c.validateSink,
		c.validateServe,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// bad is the error of one field with a wrong value.
func bad(field, msg string) error {
	return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s %s", sluice.ErrConfig, field, msg), Hint: "set " + field + " to a valid value"}
}

// validateEndpoints: source: and target: name a server and a user, with a
// TLS setting that can be built.
func (c *Config) validateEndpoints() error {
	for _, e := range []struct {
		role string
		ep   sluice.Endpoint
	}{{"source", c.Source}, {"target", c.Target}} {
		role, ep := e.role, e.ep
		if ep.Host == "" {
			return bad(role+".host", "is empty")
		}
		if ep.Port <= 0 || ep.Port > 65535 {
			return bad(role+".port", fmt.Sprintf("is %d", ep.Port))
		}
		if ep.User == "" {
			return bad(role+".user", "is empty")
		}
		if _, _, err := dbconn.TLSConfig(ep, role); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateName() error {
	if c.Name == "" || strings.ContainsAny(c.Name, "/\\ ") {
		return bad("name", "must be a non-empty word")
	}
	return nil
}

// validateTables: at least one include pattern, every pattern well formed.
func (c *Config) validateTables() error {
	if len(c.Tables.Include) == 0 {
		return bad("tables.include", "is empty (e.g. [\"mydb.*\"])")
	}
	for _, p := range append(append([]string{}, c.Tables.Include...), c.Tables.Exclude...) {
		if _, _, err := splitPattern(p); err != nil {
			return bad("tables pattern "+strconvQuote(p), err.Error())
		}
	}
	return nil
}

// validateRoutes: each route has its two schemas, patterns that compile,
// and target names the server can create.
func (c *Config) validateRoutes() error {
	for i, r := range c.Routes {
		if r.Schema == "" || r.TargetSchema == "" {
			return bad(fmt.Sprintf("routes[%d]", i), "needs schema and target-schema")
		}
		for _, part := range []struct{ key, p string }{{"schema", r.Schema}, {"table", r.Table}} {
			if part.p == "" {
				continue
			}
			if _, err := compilePart(part.p); err != nil {
				return bad(fmt.Sprintf("routes[%d].%s %q", i, part.key, part.p), err.Error())
			}
		}
		if err := CheckName(fmt.Sprintf("routes[%d].target-schema", i), r.TargetSchema); err != nil {
			return err
		}
		if r.TargetTable != "" {
			if err := CheckName(fmt.Sprintf("routes[%d].target-table", i), r.TargetTable); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateCopy: the full copy's sizes.
func (c *Config) validateCopy() error {
	if c.Threads < 1 || c.Threads > 256 {
		return bad("threads", fmt.Sprintf("is %d (1-256)", c.Threads))
	}
	if c.PoolSize < 1 || c.PoolSize > 256 {
		return bad("pool-size", fmt.Sprintf("is %d (1-256)", c.PoolSize))
	}
	if c.RowsPerChunk < 1 {
		return bad("rows-per-chunk", "must be positive")
	}
	if c.RowsPerStatement < 0 {
		return bad("rows-per-statement", "must be 0 (LOAD DATA) or positive")
	}
	return nil
}

// validateIncremental: the replication's sizes and its enumerations.
func (c *Config) validateIncremental() error {
	in := &c.Incremental
	if in.WorkerCount < 1 || in.WorkerCount > fence.MaxWorkers {
		return bad("incremental.worker-count", fmt.Sprintf("is %d (1-%d)", in.WorkerCount, fence.MaxWorkers))
	}
	if in.Batch < 1 {
		return bad("incremental.batch", "must be positive")
	}
	for _, e := range []struct {
		field, value string
		ok           []string
		msg          string
	}{
		{"incremental.flavor", in.Flavor, []string{"", "mariadb", "mysql"}, "must be mariadb or mysql"},
		{"incremental.commit-order", in.CommitOrder, []string{"", "source", "relaxed"}, "must be source or relaxed"},
		{"incremental.on-missing-row", in.OnMissingRow, []string{"", "stop", "skip"}, "must be stop or skip"},
		{"incremental.online-ddl", in.OnlineDDL, []string{"", "none", "gh-ost", "pt-osc"}, "must be gh-ost, pt-osc or none"},
	} {
		if !oneOf(e.value, e.ok...) {
			return bad(e.field, e.msg)
		}
	}
	return nil
}

func oneOf(v string, ok ...string) bool {
	for _, o := range ok {
		if v == o {
			return true
		}
	}
	return false
}

// validateSink: a sink: section names a Kafka sink with brokers and a
// topic prefix, and replaces target:.
func (c *Config) validateSink() error {
	if !c.present["sink"] {
		return nil
	}
	if c.Sink.Kafka == nil {
		return bad("sink", "names no sink (use sink: {kafka: {brokers: [host:port], topic-prefix: P}})")
	}
	if c.present["target"] {
		return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: both target: and sink: are set", sluice.ErrConfig), Hint: "a task writes to a target database or to a sink: remove one of them"}
	}
	k := c.Sink.Kafka
	if len(k.Brokers) == 0 {
		return bad("sink.kafka.brokers", "is empty (e.g. [127.0.0.1:9092])")
	}
	if k.TopicPrefix == "" {
		return bad("sink.kafka.topic-prefix", "is empty (e.g. dbserver1)")
	}
	if a := k.SASL; a != nil {
		if !oneOf(a.Mechanism, "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") {
			return bad("sink.kafka.sasl.mechanism", "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		if a.User == "" {
			return bad("sink.kafka.sasl.user", "is empty (sasl: {mechanism: PLAIN, user: U, password: ${VAR}})")
		}
	}
	// No "preferred" TLS mode: a Kafka listener speaks TLS or it does not,
	// and falling back to plaintext would send the SASL password in clear.
	if t := k.TLS; t != nil && !oneOf(t.Mode, "", "disabled", "required", "verify-ca", "verify-identity") {
		return bad("sink.kafka.tls.mode", "must be verify-identity (the default), verify-ca, required or disabled")
	}
	if !oneOf(k.Format, "", "debezium", "canal-json") {
		return bad("sink.kafka.format", "must be debezium or canal-json")
	}
	return nil
}

// validateServe: a serve: section listens somewhere, with a server id and
// users of its own (no anonymous access), TLS files in pairs, and a purge
// schedule and retention that parse.
func (c *Config) validateServe() error {
	if !c.present["serve"] {
		return nil
	}
	sv := &c.Serve
	if sv.Listen == "" {
		return bad("serve.listen", "is empty (e.g. 127.0.0.1:3310)")
	}
	if sv.ServerID == 0 {
		return bad("serve.server-id", "is missing (a server id no replica and no source uses)")
	}
	if len(sv.Users) == 0 {
		return bad("serve.users", "is empty: give at least one {user, password}; there is no anonymous access")
	}
	for i, u := range sv.Users {
		if u.User == "" || u.Password == "" {
			return bad(fmt.Sprintf("serve.users[%d]", i), "needs a user and a password")
		}
	}
	if (sv.TLSCert == "") != (sv.TLSKey == "") {
		return bad("serve.tls-cert and serve.tls-key", "go together")
	}
	if sv.RequireTLS && sv.TLSCert == "" {
		return bad("serve.require-tls", "needs serve.tls-cert and serve.tls-key")
	}
	if d, err := time.ParseDuration(sv.PurgeInterval); err != nil || d <= 0 {
		return bad("serve.purge-interval", "must be a positive duration such as 1m")
	}
	if a := sv.Retain.Age; a != "" {
		if d, err := time.ParseDuration(a); err != nil || d < 0 {
			return bad("serve.retain.age", "must be a duration such as 24h or 7d written as 168h")
		}
	}
	if _, err := sv.Retain.RetainBytes(); err != nil {
		return bad("serve.retain.size", err.Error())
	}
	return nil
}
