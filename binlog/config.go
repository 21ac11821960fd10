// Package binlog reads a source server's binlog over the replication
// protocol, as a replica does, with go-mysql's BinlogSyncer underneath. It
// adds what the library leaves to its users: context-aware reads,
// pre-flight checks that refuse unsupported settings with an error naming
// the fix, reconnection with backoff from the exact next position, and
// resolving a GTID set to a file/position.
package binlog

import (
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/sluice-db/sluice"
)

// Config configures a Reader.
type Config struct {
	Source sluice.Endpoint
	// ServerID is the replica server_id sluice registers with; it must
	// differ from every server in the topology.
	ServerID uint32
	// Flavor is "mariadb" or "mysql"; empty means detect with SELECT VERSION().
	Flavor string
	// Heartbeat is the period of the source's heartbeat events while idle.
	Heartbeat time.Duration
	// ReadTimeout: a connection silent for this long is considered dead and
	// reopened. Zero means 3 heartbeats plus 5s.
	ReadTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnect attempts.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetries is how many consecutive failed reconnects are tolerated;
	// 0 means retry until the context ends.
	MaxRetries int
	// Logger receives go-mysql's and the reader's messages; nil discards them.
	Logger *slog.Logger
	// Notify, when set, receives one line for each lost connection (with
	// its reason) and each reconnect, for the task's log: a reconnect storm
	// (another replica with the same server-id) must not be silent.
	Notify func(format string, args ...any)
	// ServerTLS says the source accepts TLS (Info.TLS): with tls.mode
	// preferred the binlog connection is encrypted then, as the SQL ones are.
	ServerTLS bool
}

// DefaultServerID is used when the task gives none: a high value unlikely to
// clash with real servers.
const DefaultServerID = 4_200_000_001

// ServerIDFor is a task's default server-id: derived from its name, so that
// two tasks on one source do not register with the same id and keep
// disconnecting each other (a source drops the older dump connection of a
// server-id that connects again). In [4_200_000_001, 2^32-1].
func ServerIDFor(task string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(task))
	return DefaultServerID + h.Sum32()%(math.MaxUint32-DefaultServerID+1)
}

// DefaultConfig returns a Config for src.
func DefaultConfig(src sluice.Endpoint) Config {
	return Config{Source: src, ServerID: DefaultServerID, Heartbeat: time.Second,
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "binlog reader", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Source.Host == "" || c.Source.Port <= 0 || c.Source.Port > 65535 {
		return bad("source address "+c.Source.Addr(), "set source.host and source.port")
	}
	if c.ServerID == 0 {
		return bad("server-id is 0", "set incremental.server-id to a value no server in the topology uses")
	}
	switch c.Flavor {
	case "", "mariadb", "mysql":
	default:
		return bad("flavor "+c.Flavor, "use mariadb or mysql")
	}
	if c.Heartbeat <= 0 {
		return bad("heartbeat must be positive", "use DefaultConfig")
	}
	if c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		return bad("backoff bounds", "use DefaultConfig")
	}
	return nil
}

func (c Config) readTimeout() time.Duration {
	if c.ReadTimeout > 0 {
		return c.ReadTimeout
	}
	return 3*c.Heartbeat + 5*time.Second
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
