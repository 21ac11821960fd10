package serve

import (
	"fmt"
	"net"
	"runtime/debug"

	"github.com/go-mysql-org/go-mysql/server"
)

// A panic in one session must not end the service: every other replica
// and the task's own replication run in the same process. go-mysql's
// server panics on input a hostile client can send (an empty command
// packet indexes its first byte: server/command.go dispatch), and the
// service cannot reach the packet before go-mysql reads it. So each
// command, and the handshake, runs under a recover: the panic is logged
// with its stack and counted (Server.Panics; the protocol fuzz test
// allows only the known go-mysql one), and that session is closed. MariaDB
// answers an empty packet with ERR 1047 Unknown command and keeps the
// session; the service closes it.

// handleCommand runs one command of a session.
func (s *Server) handleCommand(conn *server.Conn) (err error) {
	defer s.recoverSession("command", &err)
	return conn.HandleCommand()
}

// recoverSession turns a panic into an error that ends the session.
func (s *Server) recoverSession(phase string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	stack := debug.Stack()
	s.mu.Lock()
	s.panics = append(s.panics, fmt.Sprintf("%v\n%s", r, stack))
	s.mu.Unlock()
	s.slog.Error("serve: a session panicked; it is closed, the service goes on", "phase", phase, "panic", fmt.Sprint(r), "stack", string(stack))
	*err = fmt.Errorf("serve: session panicked in %s: %v", phase, r)
}

// Panics lists the panics sessions recovered from, each with its stack.
func (s *Server) Panics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.panics...)
}

// handshake authenticates a new connection.
func (s *Server) handshake(c net.Conn, sess *session) (conn *server.Conn, err error) {
	defer s.recoverSession("handshake", &err)
	return s.srv.NewCustomizedConn(c, s.auth, sess)
}
