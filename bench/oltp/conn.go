package oltp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/bench/report"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// Conn says how to reach the measured server, with sysbench's option names
// less the "mysql-" prefix.
type Conn struct {
	Host     string
	Port     int
	User     string
	Password string
	DB       string
	Socket   string // unix socket; overrides Host and Port when set
	// ConnectTimeout bounds each dial; 0 means 5s.
	ConnectTimeout time.Duration
}

// DefaultConn is 127.0.0.1:3306 as root, database sbtest.
func DefaultConn() Conn {
	return Conn{Host: "127.0.0.1", Port: 3306, User: "root", DB: "sbtest"}
}

// ParseDSN fills a Conn from a Go MySQL DSN, user:pass@tcp(host:port)/db, as
// `sluice sandbox up` prints it. An empty database keeps c.DB.
func (c Conn) ParseDSN(dsn string) (Conn, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return c, fmt.Errorf("invalid --dsn: %v (use user:password@tcp(host:port)/db)", err)
	}
	c.User, c.Password = cfg.User, cfg.Passwd
	switch cfg.Net {
	case "unix":
		c.Socket = cfg.Addr
	default:
		host, port, ok := strings.Cut(cfg.Addr, ":")
		if i := strings.LastIndex(cfg.Addr, ":"); i >= 0 && strings.HasPrefix(cfg.Addr, "[") {
			host, port, ok = strings.Trim(cfg.Addr[:i], "[]"), cfg.Addr[i+1:], true
		}
		c.Host = host
		if ok {
			p, err := strconv.Atoi(port)
			if err != nil {
				return c, fmt.Errorf("invalid --dsn port %q", port)
			}
			c.Port = p
		}
	}
	if cfg.DBName != "" {
		c.DB = cfg.DBName
	}
	return c, nil
}

// Validate checks the connection settings.
func (c Conn) Validate() error {
	if c.Socket == "" {
		if c.Host == "" {
			return errors.New("empty --host")
		}
		if c.Port <= 0 || c.Port > 65535 {
			return fmt.Errorf("invalid --port %d: use 1 to 65535", c.Port)
		}
	}
	if c.User == "" {
		return errors.New("empty --user")
	}
	if c.DB == "" || strings.ContainsAny(c.DB, "`/\\.") {
		return fmt.Errorf("invalid --db %q", c.DB)
	}
	return nil
}

// Endpoint is the server as sluice names it in errors.
func (c Conn) Endpoint() sluice.Endpoint {
	return sluice.Endpoint{Host: c.Host, Port: c.Port, User: c.User, Password: c.Password}
}

// Addr is host:port or the socket path, for messages; never the password.
func (c Conn) Addr() string {
	if c.Socket != "" {
		return c.Socket
	}
	return c.Endpoint().Addr()
}

// driverConfig: plain sessions, no client-side interpolation, so that
// statements with arguments are server-side prepared as in sysbench.
func (c Conn) driverConfig(db string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = c.User, c.Password
	if c.Socket != "" {
		cfg.Net, cfg.Addr = "unix", c.Socket
	} else {
		cfg.Net, cfg.Addr = "tcp", c.Endpoint().Addr()
	}
	cfg.DBName = db
	cfg.Timeout = c.ConnectTimeout
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.InterpolateParams = false
	cfg.AllowNativePasswords = true
	cfg.MultiStatements = false
	return cfg
}

// open returns a pool to db ("" for none) after one successful ping.
func (c Conn) open(ctx context.Context, db string, idle int) (*sql.DB, error) {
	conn, err := mysql.NewConnector(c.driverConfig(db))
	if err != nil {
		return nil, fmt.Errorf("connection settings: %v", err)
	}
	pool := sql.OpenDB(conn)
	pool.SetMaxIdleConns(idle)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, c.classify(err)
	}
	return pool, nil
}

// classify turns a connection error into one line that names the flag to fix.
func (c Conn) classify(err error) error {
	err = dbconn.Classify(err, "server", c.Endpoint())
	var se *sluice.Error
	if errors.As(err, &se) {
		se2 := *se
		switch {
		case errors.Is(err, sluice.ErrUnreachable):
			se2.Hint = "check that the server is running and --host/--port (or --socket) are right"
		case errors.Is(err, sluice.ErrAccessDenied):
			se2.Hint = "check --user and --password"
		case errors.Is(err, sluice.ErrUnknownTable):
			se2.Hint = "check --db, and run `sluice bench oltp prepare` with the same --db and --tables"
		}
		return &se2
	}
	return err
}

// ServerInfo asks the server for its version.
func ServerInfo(ctx context.Context, db *sql.DB, c Conn) report.Server {
	s := report.Server{Addr: c.Addr()}
	_ = db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&s.Version, &s.VersionComment)
	return s
}
