package task

import (
	"fmt"
	"os"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// Source is one source of a global binlog (sources:): sluice serve relays
// each source's binlog and merges them into one stream, in which the
// source's transactions carry GTIDs of its own domain.
type Source struct {
	// Name names the source: its relay lives in dir/relay/<name>.
	Name            string `yaml:"name"`
	sluice.Endpoint `yaml:",inline"`
	// DomainID is the GTID domain the source's transactions get in the
	// global binlog; every source needs its own.
	DomainID *uint32 `yaml:"domain-id"`
	// ServerID, when set, replaces the source's server id in the events of
	// the global binlog.
	ServerID uint32 `yaml:"server-id"`
	// Start, for a new global binlog: a GTID set, or a file and position.
	// Empty: the source's current position.
	GTIDSet    string `yaml:"gtid-set"`
	BinlogFile string `yaml:"binlog-file"`
	BinlogPos  uint32 `yaml:"binlog-pos"`
}

// expandSources replaces ${VAR} in the sources' passwords.
func (c *Config) expandSources() error {
	for i := range c.Sources {
		s := &c.Sources[i]
		var unset string
		s.Password = envRef.ReplaceAllStringFunc(s.Password, func(m string) string {
			name := envRef.FindStringSubmatch(m)[1]
			v, ok := os.LookupEnv(name)
			if !ok && unset == "" {
				unset = name
			}
			return v
		})
		if unset != "" {
			return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: sources[%d].password: ${%s} is not set in the environment", sluice.ErrConfig, i, unset),
				Hint: "export " + unset + " before running sluice"}
		}
	}
	return nil
}

// validateSources checks sources: each source names a reachable endpoint
// and a domain id of its own, and the list is not mixed with source:.
func (c *Config) validateSources() error {
	if m := c.Serve.MaxBinlogSize; m != 0 && (m < 1<<16 || m > 1<<32-1) {
		return c.sourcesErr("serve.max-binlog-size", fmt.Sprintf("is %d", m), "give a size in bytes from 65536 to 4294967295 (default 268435456)")
	}
	if m := c.Serve.MergeMemory; m < 0 {
		return c.sourcesErr("serve.merge-memory", fmt.Sprintf("is %d", m), "give a size in bytes (default 33554432)")
	}
	if len(c.Sources) == 0 {
		if c.present["sources"] {
			return c.sourcesErr("sources", "is empty", "list at least one {name, host, port, user, password, domain-id}, or use source:")
		}
		return nil
	}
	if c.present["source"] {
		return c.sourcesErr("source and sources", "are both set", "keep source: for one source, or sources: for a global binlog of several, not both")
	}
	if c.present["target"] {
		return c.sourcesErr("sources", "is set with a target", "sources: makes a global binlog for sluice serve; remove target:")
	}
	names := map[string]int{}
	domains := map[uint32]int{}
	for i, s := range c.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		if s.Name == "" || strings.ContainsAny(s.Name, "/\\ .") {
			return c.sourcesErr(f+".name", "must be a non-empty word (no /, \\, space or dot)", "name each source, e.g. name: shard1")
		}
		if j, dup := names[s.Name]; dup {
			return c.sourcesErr(f+".name", fmt.Sprintf("%q is also sources[%d]'s name", s.Name, j), "give every source its own name")
		}
		names[s.Name] = i
		if s.DomainID == nil {
			return c.sourcesErr(f+".domain-id", "is missing", "give every source its own GTID domain id, e.g. domain-id: "+fmt.Sprint(i+1))
		}
		if j, dup := domains[*s.DomainID]; dup {
			return c.sourcesErr(f+".domain-id", fmt.Sprintf("%d is also sources[%d]'s", *s.DomainID, j), "give every source its own GTID domain id")
		}
		domains[*s.DomainID] = i
		if s.Host == "" && s.Socket == "" {
			return c.sourcesErr(f+".host", "is empty", "set the source's host and port")
		}
		if s.Socket == "" && (s.Port <= 0 || s.Port > 65535) {
			return c.sourcesErr(f+".port", fmt.Sprintf("is %d", s.Port), "set the source's port (1-65535)")
		}
		if s.User == "" {
			return c.sourcesErr(f+".user", "is empty", "set a user with REPLICATION SLAVE")
		}
		if s.GTIDSet != "" && s.BinlogFile != "" {
			return c.sourcesErr(f, "has both gtid-set and binlog-file", "start the source at a GTID set or at a file and position, not both")
		}
		if _, _, err := dbconn.TLSConfig(s.Endpoint, f); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) sourcesErr(field, msg, hint string) error {
	return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s %s", sluice.ErrConfig, field, msg), Hint: hint}
}
