package dbconn_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

func TestOpenClassifiesErrors(t *testing.T) {
	inst := sandboxtest.Start(t, "conn")
	root := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, root,
		"CREATE DATABASE secret",
		"CREATE TABLE secret.t (id INT PRIMARY KEY)",
		"CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'right-pw'",
	)
	ctx := context.Background()
	ep := sluice.Endpoint{Host: "127.0.0.1", Port: inst.Port, User: "app", Password: "wrong-pw"}

	check := func(name string, err error, sentinel error, mustMention string) {
		t.Helper()
		var se *sluice.Error
		if !errors.Is(err, sentinel) || !errors.As(err, &se) || se.Hint == "" {
			t.Fatalf("%s: want %v with a hint, got %v", name, sentinel, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, mustMention) || strings.Contains(msg, "right-pw") || strings.Contains(msg, "wrong-pw") {
			t.Fatalf("%s: message %q must be one line, mention %q and no password", name, msg, mustMention)
		}
	}

	_, err := dbconn.Open(ctx, "source", ep, dbconn.Options{})
	check("wrong password", err, sluice.ErrAccessDenied, "source.password")

	free, _ := sandbox.FreePort()
	_, err = dbconn.Open(ctx, "target", sluice.Endpoint{Host: "127.0.0.1", Port: free, User: "root"}, dbconn.Options{})
	check("unreachable", err, sluice.ErrUnreachable, "target.port")

	ep.Password = "right-pw"
	db, err := dbconn.Open(ctx, "source", ep, dbconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("SELECT * FROM secret.t")
	check("privilege", dbconn.Classify(err, "source", ep), sluice.ErrPrivilege, "grant")

	_, err = root.Exec("SELECT * FROM secret.missing")
	check("unknown table", dbconn.Classify(err, "source", inst.Endpoint()), sluice.ErrUnknownTable, "tables")
}

func TestDatabaseAccessDeniedIsAPrivilegeError(t *testing.T) {
	inst := sandboxtest.Start(t, "conn1044")
	root := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, root, "CREATE DATABASE private", "CREATE USER 'u'@'127.0.0.1' IDENTIFIED BY 'pw'")
	ep := sluice.Endpoint{Host: "127.0.0.1", Port: inst.Port, User: "u", Password: "pw"}
	// Error 1044: the password is right, the user may not use this database.
	_, err := dbconn.Open(context.Background(), "target", ep, dbconn.Options{Database: "private"})
	if !errors.Is(err, sluice.ErrPrivilege) || errors.Is(err, sluice.ErrAccessDenied) {
		t.Fatalf("want a privilege error, got %v", err)
	}
}

// TestReadOnlyTarget: a write refused by a read-only server (read_only=ON,
// a user without READ_ONLY ADMIN) is one line naming it and the fix, not a
// raw "Error 1290" (issue 16).
func TestReadOnlyTarget(t *testing.T) {
	inst := sandboxtest.Start(t, "ro")
	root := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, root,
		"CREATE USER 'w'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX ON *.* TO 'w'@'127.0.0.1'",
		"SET GLOBAL read_only = ON")
	defer root.Exec("SET GLOBAL read_only = OFF") //nolint:errcheck // the sandbox goes anyway
	ep := sluice.Endpoint{Host: "127.0.0.1", Port: inst.Port, User: "w", Password: "pw"}
	db, err := dbconn.Open(context.Background(), "target", ep, dbconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("CREATE DATABASE sluice_meta")
	if !dbconn.ReadOnly(err) {
		t.Fatalf("CREATE DATABASE on a read-only server: %v", err)
	}
	err = dbconn.Classify(err, "target", ep)
	var se *sluice.Error
	if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "read-only") || !strings.Contains(se.Hint, "read_only=OFF") || strings.Contains(err.Error(), "pw") {
		t.Fatalf("classified: %v", err)
	}
}

// TestNotMySQL: a port where another service listens (one that waits for
// the client, as HTTP does, or one that greets in its own protocol, as SSH
// does) is named as not MySQL within seconds, not "invalid connection"
// after the whole timeout (issue 16). No MySQL server is involved: the
// services are played by listeners of the test.
func TestNotMySQL(t *testing.T) {
	for name, greet := range map[string]string{"silent (HTTP)": "", "SSH": "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				if greet != "" {
					c.Write([]byte(greet)) //nolint:errcheck // the client decides
				}
				go func() { io.Copy(io.Discard, c); c.Close() }() //nolint:errcheck // until the client hangs up
			}
		}()
		ep := sluice.Endpoint{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, User: "u", Password: "secret-pw"}
		_, err = dbconn.Open(context.Background(), "source", ep, dbconn.Options{})
		l.Close()
		var se *sluice.Error
		if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "not MySQL or MariaDB") || strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStoreHintsNameTheStoreURL: the dtx store has no task file; its
// errors' fixes name the --store address (issue 16).
func TestStoreHintsNameTheStoreURL(t *testing.T) {
	ep := sluice.Endpoint{Host: "127.0.0.1", Port: 3306, User: "dtx"}
	for _, code := range []uint16{1045, 1049} {
		err := dbconn.Classify(&mysql.MySQLError{Number: code, Message: "x"}, "dtx store", ep)
		var se *sluice.Error
		if !errors.As(err, &se) || strings.Contains(se.Hint, "task file") || !strings.Contains(se.Hint, "--store") {
			t.Errorf("error %d: %v", code, err)
		}
	}
	err := dbconn.Classify(&mysql.MySQLError{Number: 1045, Message: "x"}, "target", ep)
	if !strings.Contains(err.Error(), "target.user and target.password in the task file") {
		t.Errorf("target: %v", err)
	}
}
