// Package replicate runs incremental replication for one task: a binlog
// reader feeds the relay log on disk, and a relay reader feeds the decoder
// and the parallel applier, which commits the checkpoint with the data on
// the target. The two halves only meet in the relay, so a lagging applier
// never holds the source back and survives the source purging its binlogs.
package replicate

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/task"
)

// Config configures a replication task.
type Config struct {
	Name   string
	Dir    string // task state: relay/, status.json, task.lock
	Source sluice.Endpoint
	Target sluice.Endpoint

	Binlog binlog.Config
	Relay  relay.Config
	Decode decode.Config
	Apply  apply.Config

	// Start is the position for a task without a checkpoint when the caller
	// gives none (--mode incremental): a GTID set or a file/position.
	Start sluice.Position

	// Serve, when set, serves the relay log over the replication protocol
	// while the task applies it (a task file with target: and serve:).
	Serve *task.Serve
	// ServeReady, when set, receives the binlog service's address.
	ServeReady func(addr string)

	// MetricsAddr serves Prometheus metrics ("" disables).
	MetricsAddr string
	// Registerer, when set, takes the task's metrics instead of a
	// registry of its own, and MetricsAddr is not served: a cluster worker
	// sets it to its registry, wrapped with worker="W", so that every
	// task it runs shows on its endpoint. The task takes its metrics out
	// when Run returns.
	Registerer prometheus.Registerer
	// StatusEvery is how often status.json and the metrics are refreshed.
	StatusEvery time.Duration
	// RetryMin/RetryMax bound the wait before the applying side restarts from
	// its checkpoint after a transient target failure.
	RetryMin, RetryMax time.Duration

	// Log takes the task's messages: its start, restarts, waits and stop.
	// cmd/sluice renders them with internal/logx as the lines users read
	// ("<time> replicate <task>: ..."). nil drops them (a library does not
	// write to the process's default logger unasked).
	Log *slog.Logger
}

// logger is Log, or one that drops every message.
func (c Config) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// DefaultConfig returns defaults for a task named name in dir.
func DefaultConfig(name, dir string) Config {
	a := apply.DefaultConfig()
	a.Task = name
	return Config{
		Name: name, Dir: dir,
		Binlog:      binlog.DefaultConfig(sluice.Endpoint{}),
		Relay:       relay.DefaultConfig(filepath.Join(dir, "relay")),
		Decode:      decode.DefaultConfig(),
		Apply:       a,
		MetricsAddr: "127.0.0.1:0",
		StatusEvery: time.Second,
		RetryMin:    500 * time.Millisecond,
		RetryMax:    15 * time.Second,
	}
}

// FromTask maps a task file to a Config.
func FromTask(t *task.Config) (Config, error) {
	c := DefaultConfig(t.Name, t.Dir)
	c.Source, c.Target = t.Source, t.Target
	inc := t.Incremental
	c.Binlog = binlog.DefaultConfig(t.Source)
	c.Binlog.ServerID = binlog.ServerIDFor(t.Name)
	if inc.ServerID != 0 {
		c.Binlog.ServerID = inc.ServerID
	}
	c.Binlog.Flavor = inc.Flavor
	c.Relay.Flavor = inc.Flavor
	c.Decode.Flavor = inc.Flavor
	if inc.RelaySync != "" {
		c.Relay.Sync = relay.SyncPolicy(inc.RelaySync)
	}
	if inc.RelayRetain != "" {
		d, err := time.ParseDuration(inc.RelayRetain)
		if err != nil {
			return c, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: incremental.relay-retain %q: %v", sluice.ErrConfig, inc.RelayRetain, err),
				Hint: "use a duration such as 24h or 30m"}
		}
		c.Relay.Retain = d
	}
	c.Decode.Selected, c.Decode.Route = t.Selected, t.Route
	c.Decode.RouteSchema, c.Decode.SchemaSelected = t.RouteSchema, t.SchemaSelected
	c.Decode.OnlineDDL = inc.OnlineDDL
	c.Apply.Task = t.Name
	c.Apply.Workers, c.Apply.Batch = inc.WorkerCount, inc.Batch
	c.Apply.RelaxedOrder = inc.CommitOrder == "relaxed"
	if inc.OnMissingRow != "" {
		c.Apply.OnMissingRow = inc.OnMissingRow
	}
	c.MetricsAddr = inc.MetricsAddr
	if t.Has("serve") {
		sv := t.Serve
		c.Serve = &sv
		if sv.Retain.Age != "" {
			d, err := time.ParseDuration(sv.Retain.Age)
			if err != nil {
				return c, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: serve.retain.age %q: %v", sluice.ErrConfig, sv.Retain.Age, err), Hint: "use a duration such as 24h"}
			}
			c.Relay.Retain = d
		}
		b, err := sv.Retain.RetainBytes()
		if err != nil {
			return c, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: serve.retain.size: %v", sluice.ErrConfig, err), Hint: "use a size such as 10G"}
		}
		c.Relay.RetainBytes = b
	}
	c.Start = sluice.Position{File: inc.BinlogFile, Pos: inc.BinlogPos, GTIDSet: inc.GTIDSet, Flavor: inc.Flavor}
	return c, c.Validate()
}

// Validate checks the config. Flavor may still be empty: Run detects it.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "replication task", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Name == "" || c.Dir == "" {
		return bad("name and dir are required", "set name (and dir) in the task file")
	}
	if c.StatusEvery <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		return bad("status/retry intervals", "use DefaultConfig")
	}
	b := c.Binlog
	b.Source = c.Source
	if err := b.Validate(); err != nil {
		return err
	}
	r := c.Relay
	if r.Flavor == "" {
		r.Flavor = "mariadb"
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if err := c.Decode.Validate(); err != nil {
		return err
	}
	return c.Apply.Validate()
}
