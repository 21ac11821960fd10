package serve_test

import (
	"database/sql"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/serve"
)

// An unknown user (the source's root, say) is refused exactly as a wrong
// password is: ERR 1045 Access denied, as MariaDB answers both. go-mysql's
// server answered it with 1449 "definer does not exist", which tells a
// client which user names exist (issue 30 F4).
func TestUnknownUserIsAccessDenied(t *testing.T) {
	s, err := serve.New(serve.Config{ServerID: 999, Users: []serve.User{{Name: "repl", Password: "pw"}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck // ends with Close
	defer func() { ln.Close(); s.Close() }()

	login := func(user, pw string) error {
		c := gomysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr = user, pw, "tcp", ln.Addr().String()
		c.Timeout, c.ReadTimeout = 5*time.Second, 5*time.Second
		conn, err := gomysql.NewConnector(c)
		if err != nil {
			return err
		}
		d := sql.OpenDB(conn)
		defer d.Close()
		return d.Ping()
	}
	for _, tc := range []struct{ user, pw string }{{"root", ""}, {"root", "secret"}, {"nobody", "pw"}, {"repl", "wrong"}} {
		err := login(tc.user, tc.pw)
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1045 || !strings.Contains(me.Message, "Access denied for user '"+tc.user+"'") {
			t.Errorf("user %q password %q: got %v, want ERR 1045 Access denied", tc.user, tc.pw, err)
		}
	}
	if err := login("repl", "pw"); err != nil {
		t.Fatalf("the configured user: %v", err)
	}
}
