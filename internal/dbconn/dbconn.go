// Package dbconn opens database/sql connections to MySQL-family servers with
// the session settings sluice relies on, and turns driver errors into
// one-line *sluice.Error values that tell the user what to fix.
package dbconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// Options tune a connection pool.
type Options struct {
	Database string        // default schema, may be empty
	MaxOpen  int           // 0 means unlimited
	Timeout  time.Duration // dial timeout; 0 means 5s
	// Params are extra session variables, e.g. {"time_zone": "'+00:00'"}.
	Params map[string]string
	// Wrap, when set, wraps the driver's connector (a fence, for one).
	Wrap func(driver.Connector) driver.Connector
	// Role names the endpoint in TLS setting errors ("source", "target").
	Role string
	// ReadBuffer, when above zero, reads each connection through a buffer
	// of that many bytes. The driver's own read buffer is 4 KiB, so a
	// large result set costs a read system call per 4 KiB; a dump reads
	// gigabytes that way.
	ReadBuffer int
}

func (o Options) role() string {
	if o.Role == "" {
		return "server"
	}
	return o.Role
}

// Config returns the driver config for an endpoint. Sessions always run in
// UTC with utf8mb4 so that TIMESTAMP values and text round-trip exactly.
func Config(ep sluice.Endpoint, o Options) *mysql.Config {
	c := mysql.NewConfig()
	c.User = ep.User
	c.Passwd = ep.Password
	c.Net = "tcp"
	c.Addr = ep.Addr()
	if ep.Socket != "" {
		c.Net, c.Addr = "unix", ep.Socket
	}
	tc, fallback, err := TLSConfig(ep, o.role())
	if err != nil {
		// Task files are validated before a connection is made; should a
		// bad setting reach here, every connection fails with it.
		tc = &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(tls.ConnectionState) error { return err }}
	}
	c.TLS, c.AllowFallbackToPlaintext = tc, fallback
	if fallback {
		_ = CopyPerConnection(c)
	}
	c.DBName = o.Database
	c.Timeout = o.Timeout
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	c.InterpolateParams = true
	c.MultiStatements = false
	c.ParseTime = false
	c.MaxAllowedPacket = 0 // ask the server
	c.AllowNativePasswords = true
	c.AllowAllFiles = false
	c.Params = map[string]string{"time_zone": "'+00:00'"}
	c.Collation = "utf8mb4_general_ci"
	if ep.SessionServerID != 0 {
		c.Params["server_id"] = strconv.FormatUint(uint64(ep.SessionServerID), 10)
	}
	for k, v := range o.Params {
		c.Params[k] = v
	}
	if o.ReadBuffer > 0 {
		size := o.ReadBuffer
		c.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			// What the driver's own dial does (net.Dialer's defaults keep
			// TCP keepalives on, as the driver sets them).
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, size)}, nil
		}
	}
	return c
}

// bufferedConn reads through a buffer; writes, deadlines and Close are the
// connection's own. The protocol is request and response, so nothing sits
// in the buffer while the driver waits to write.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// SyscallConn keeps the driver's liveness check of a pooled connection
// (a non-blocking read of the socket before the first query), which it
// makes only on a connection that has one.
func (c *bufferedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// Open opens a pool to ep and pings it. role names the endpoint in errors
// ("source", "target"). Errors are *sluice.Error with a hint.
func Open(ctx context.Context, role string, ep sluice.Endpoint, o Options) (*sql.DB, error) {
	if o.Role == "" {
		o.Role = role
	}
	if _, _, err := TLSConfig(ep, role); err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(Config(ep, o))
	if err != nil {
		return nil, &sluice.Error{Op: "configure " + role + " " + ep.Addr(), Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "check " + fields(role, "host", "port", "user")}
	}
	var c driver.Connector = conn
	if o.Wrap != nil {
		c = o.Wrap(conn)
	}
	db := sql.OpenDB(c)
	if o.MaxOpen > 0 {
		db.SetMaxOpenConns(o.MaxOpen)
		db.SetMaxIdleConns(o.MaxOpen)
	}
	db.SetConnMaxIdleTime(10 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, o.timeout()+5*time.Second)
	defer cancel()
	pinged := make(chan error, 1)
	go func() { pinged <- db.PingContext(pctx) }()
	select {
	case err = <-pinged:
	case <-time.After(probeAfter):
		// No answer yet: a server that is not MySQL (HTTP, say) waits for
		// the client to speak first, and the driver would wait out the
		// whole timeout, then say "invalid connection".
		if perr := probe(ep, role, time.Second); perr != nil {
			cancel()
			<-pinged
			db.Close()
			return nil, perr
		}
		err = <-pinged
	}
	if err != nil {
		db.Close()
		if perr := probe(ep, role, 2*time.Second); perr != nil {
			return nil, perr
		}
		return nil, Classify(err, role, ep)
	}
	return db, nil
}

// probeAfter is how long Open waits for the server's greeting before it
// checks, on a connection of its own, that the server speaks MySQL.
var probeAfter = 2 * time.Second

// probe returns an error when ep accepts TCP connections but does not greet
// as a MySQL server does (a protocol 10 handshake, or an error packet):
// another service on that port. It returns nil when the server is MySQL or
// cannot be reached at all (Classify says so then). It runs only when a
// connection failed or is slow: a connection that never completes its
// handshake counts against the server's max_connect_errors.
func probe(ep sluice.Endpoint, role string, wait time.Duration) error {
	if ep.Socket != "" {
		return nil
	}
	c, err := net.DialTimeout("tcp", ep.Addr(), wait)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	b := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, b, 5)
	b = b[:n]
	if n >= 5 && (b[4] == 10 || b[4] == 0xff) {
		return nil
	}
	what := "it sent nothing in " + wait.String()
	if n > 0 {
		what = fmt.Sprintf("it sent %q", strings.TrimSpace(strings.ToValidUTF8(string(b), "?")))
	}
	return &sluice.Error{Op: "connect to " + role + " " + ep.Addr(), Err: fmt.Errorf("%w: the server there is not MySQL or MariaDB (%s)", sluice.ErrConfig, what),
		Hint: "check " + fields(role, "host", "port") + ": they name another service"}
}

func (o Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return 5 * time.Second
	}
	return o.Timeout
}

// Classify turns a driver error into a *sluice.Error naming the fix. Errors it
// does not recognise are wrapped with the endpoint for context.
func Classify(err error, role string, ep sluice.Endpoint) error {
	if err == nil {
		return nil
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	op := role + " " + ep.Addr()
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1045, 1698:
			hint := "check " + fields(role, "user", "password")
			if ep.TLS.Mode == "disabled" {
				// MariaDB refuses plaintext under require_secure_transport
				// with this same error.
				hint += "; if the server sets require_secure_transport, set " + role + ".tls.mode to required or stronger"
			}
			return &sluice.Error{Op: "connect to " + op, Err: fmt.Errorf("%w for user %q: %s", sluice.ErrAccessDenied, ep.User, me.Message),
				Hint: hint}
		case 1044, 1142, 1143, 1227, 1370, 1419:
			return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s", sluice.ErrPrivilege, me.Message),
				Hint: "grant the missing privilege to " + ep.User + " on " + role + " (see docs/manual/taskfile.md, Privileges)"}
		case 1146, 1049:
			return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s", sluice.ErrUnknownTable, me.Message),
				Hint: tablesHint(role)}
		case 1021:
			return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s", sluice.ErrDiskFull, me.Message), Hint: "free disk space on the " + role + " server"}
		case 8004: // TiDB
			return TiDBTxnTooLarge(err, "write to "+op)
		case 1290, 1836:
			if ReadOnly(err) {
				return &sluice.Error{Op: "write to " + op, Err: fmt.Errorf("%w: the server is read-only (read_only=ON): %s", sluice.ErrConfig, me.Message),
					Hint: "point " + fields(role, "host", "port") + " at a writable server (the primary), or run SET GLOBAL read_only=OFF there if it is meant to take writes"}
			}
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if e := tlsRefusal(err, role, ep); e != nil { // tlserr.go
		return e
	}
	if isUnreachable(err) {
		return &sluice.Error{Op: "connect to " + op, Err: fmt.Errorf("%w: %v", sluice.ErrUnreachable, oneLine(err)),
			Hint: "check that the server is running and " + fields(role, "host", "port") + " name it"}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isUnreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &oe):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return strings.Contains(err.Error(), "no such host")
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// IsRetryable reports whether a statement failing with err may succeed when
// retried on a new connection (lost connection, deadlock, lock wait timeout).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1213, 2006, 2013, 1053, 1927, 4031:
			return true
		}
		return false
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || isUnreachable(err)
}

// ReadOnly reports a write refused because the server is read-only
// (read_only or super_read_only: errors 1290 and 1836).
func ReadOnly(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1836 || me.Number == 1290 && strings.Contains(strings.ToLower(me.Message), "read-only")
}

// fields names where the user sets the given settings of role: keys of the
// task file for "source" and "target"; the --store URL of sluice dtx serve
// for the dtx store, which has no task file.
func fields(role string, keys ...string) string {
	switch role {
	case "source", "target":
		var b strings.Builder
		for i, k := range keys {
			if i > 0 {
				b.WriteString(map[bool]string{true: " and ", false: ", "}[i == len(keys)-1])
			}
			b.WriteString(role + "." + k)
		}
		return b.String() + " in the task file"
	}
	return "the " + strings.Join(keys, ", ") + " in the " + role + "'s address (sluice dtx serve --store mysql://USER:PASSWORD@HOST:PORT/DB)"
}

func tablesHint(role string) string {
	if role == "source" || role == "target" {
		return "check tables.include and tables.exclude in the task file against the " + role
	}
	return "check the database in the " + role + "'s address (sluice dtx serve --store mysql://USER:PASSWORD@HOST:PORT/DB)"
}

// CopyPerConnection makes each connection of a pool built from c work on
// its own copy of c. The driver falls back from tls=preferred to plain
// text by clearing TLS in the connector's own config, which every
// connection shares: two connections opened at once race
// (go-sql-driver/mysql v1.9.3, packets.go readHandshakePacket). A
// BeforeConnect hook, even one that does nothing, makes the driver copy.
func CopyPerConnection(c *mysql.Config) error {
	return c.Apply(mysql.BeforeConnect(func(context.Context, *mysql.Config) error { return nil }))
}
