// Package serve is sluice's binlog service: it serves the relay log over
// the MySQL replication protocol, as a MariaDB primary serves its binlog,
// to stock replicas, mariadb-binlog and CDC tools. It is built on
// go-mysql's server package for the handshake, authentication and result
// sets; the dump itself (COM_BINLOG_DUMP with its flags, the artificial
// Rotate, the served FDE, heartbeats, ERR 1236) is written here, because
// go-mysql's replication handler drops the flags and cannot end a dump
// with an error the replica can read.
package serve

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/server"
)

// Version is the version string the service advertises. A MariaDB
// replica turns GTID off against a server whose major version is below 10
// (slave.cc get_master_version_and_clock), and go-mysql's default is
// MySQL's "8.0.11"; the 5.5.5- prefix is MariaDB's own replication prefix.
const Version = "5.5.5-10.11.0-MariaDB-sluice"

// User is one account of the service.
type User struct {
	Name     string
	Password string
}

// Config is the service's part of a task file (serve:).
type Config struct {
	// ServerID is the service's own server id: a replica with the same
	// one is refused, as a primary refuses it.
	ServerID uint32
	Users    []User
	// TLS, when set, lets clients switch to TLS; RequireTLS refuses the
	// ones that do not.
	TLS        *tls.Config
	RequireTLS bool
	// Source, when set, answers the metadata queries only a real server
	// can (forward.go). NoForward, when Source is nil, says why there is
	// none, in the error such a query gets.
	Source    *Source
	NoForward string
}

// DefaultConfig is a service with no users yet: Validate refuses it until
// the task gives a server id and at least one user.
func DefaultConfig() Config { return Config{} }

// Validate checks the config: a server id, at least one user with a name
// and a password, and a certificate when TLS is required.
func (c Config) Validate() error {
	if c.ServerID == 0 {
		return errors.New("serve: server-id must be set (and differ from every replica's)")
	}
	if c.RequireTLS && c.TLS == nil {
		return errors.New("serve: require-tls needs a certificate (serve.tls-cert and serve.tls-key)")
	}
	if len(c.Users) == 0 {
		return errors.New("serve: give at least one user with a password under serve.users")
	}
	for _, u := range c.Users {
		if u.Name == "" || u.Password == "" {
			return fmt.Errorf("serve: user %q needs a name and a password", u.Name)
		}
	}
	return nil
}

// Server serves one relay log.
type Server struct {
	cfg  Config
	log  Binlog
	auth server.AuthenticationHandler
	srv  *server.Server
	slog *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	byID   map[uint32]net.Conn // connection id -> its connection, for KILL
	regs   map[uint32]Replica  // connection id -> registered replica
	dumps  map[*dumpStat]struct{}
	met    *serveMetrics
	closed bool
	wg     sync.WaitGroup
	panics []string // recovered session panics (recover.go)
}

// New checks cfg and builds a server for l. Every connection must
// authenticate as one of cfg.Users: there is no anonymous access.
func New(cfg Config, l Binlog, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	auth := server.NewInMemoryAuthenticationHandler(mysql.AUTH_NATIVE_PASSWORD)
	for _, u := range cfg.Users {
		if err := auth.AddUser(u.Name, u.Password); err != nil {
			return nil, fmt.Errorf("serve: user %q: %w", u.Name, err)
		}
	}
	var ah server.AuthenticationHandler = hideUsers{auth}
	if cfg.RequireTLS {
		ah = tlsOnly{hideUsers{auth}}
	}
	return &Server{cfg: cfg, log: l, auth: ah, slog: log, conns: map[net.Conn]struct{}{}, byID: map[uint32]net.Conn{}, regs: map[uint32]Replica{}, dumps: map[*dumpStat]struct{}{}, met: newServeMetrics(),
		srv: server.NewServer(Version, mysql.DEFAULT_COLLATION_ID, mysql.AUTH_NATIVE_PASSWORD, nil, cfg.TLS)}, nil
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serveConn(c)
		}()
	}
}

// Close ends every session and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) register(id uint32, r Replica) {
	s.mu.Lock()
	s.regs[id] = r
	s.mu.Unlock()
}

// replicas lists the connected, registered replicas.
func (s *Server) replicas() map[uint32]Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint32]Replica, len(s.regs))
	for id, r := range s.regs {
		out[id] = r
	}
	return out
}

// kill closes the connection with that id (a dump in progress ends).
func (s *Server) kill(id uint32) bool {
	s.mu.Lock()
	c, ok := s.byID[id]
	s.mu.Unlock()
	if ok {
		c.Close()
	}
	return ok
}

func (s *Server) serveConn(c net.Conn) {
	sess := newSession(s)
	conn, err := s.handshake(c, sess)
	if err != nil {
		s.slog.Info("serve: handshake", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	sess.conn = conn
	defer sess.closeSource()
	id := conn.ConnectionID()
	s.mu.Lock()
	s.byID[id] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.byID, id)
		delete(s.regs, id)
		s.mu.Unlock()
	}()
	for !conn.Closed() {
		if err := s.handleCommand(conn); err != nil {
			return
		}
	}
}

// tlsOnly refuses, at the end of the handshake, a client that did not
// switch to TLS, with an error it shows.
type tlsOnly struct {
	hideUsers
}

func (a tlsOnly) OnAuthSuccess(c *server.Conn) error {
	if _, ok := c.Conn.Conn.(*tls.Conn); !ok {
		return mysql.NewError(mysql.ER_ACCESS_DENIED_ERROR, "sluice serve requires TLS (fix: connect with --ssl, or MASTER_SSL=1 on a replica)")
	}
	return a.hideUsers.OnAuthSuccess(c)
}

// hideUsers answers an unknown user as a wrong password: go-mysql answers
// it with ERR 1449 ("definer does not exist"), which tells a client which
// users exist; MariaDB answers both with 1045 Access denied. The unknown
// user gets a credential no client can match, a fresh random password, so
// the handshake takes the same path and time as a wrong password.
type hideUsers struct {
	*server.InMemoryAuthenticationHandler
}

func (a hideUsers) GetCredential(user string) (server.Credential, bool, error) {
	c, found, err := a.InMemoryAuthenticationHandler.GetCredential(user)
	if err != nil || (found && len(c.Passwords) > 0) {
		return c, found, err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return server.Credential{}, false, err
	}
	return server.Credential{Passwords: []string{hex.EncodeToString(b[:])}, AuthPluginName: mysql.AUTH_NATIVE_PASSWORD}, true, nil
}
