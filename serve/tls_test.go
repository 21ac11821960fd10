package serve_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/serve"
)

// TestRequireTLS: with serve.require-tls, a client that does not switch
// to TLS is refused with the fix, and one that does is served.
func TestRequireTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}

	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(start)
	s, err := serve.New(serve.Config{ServerID: 999, Users: []serve.User{{Name: "repl", Password: "pw"}},
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, RequireTLS: true}, replicate.ServeLog(l), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck // ends with Close
	defer func() { ln.Close(); s.Close() }()

	query := func(tlsName string) error {
		c := gomysql.NewConfig()
		c.User, c.Passwd, c.Net, c.Addr, c.TLSConfig = "repl", "pw", "tcp", ln.Addr().String(), tlsName
		c.Timeout, c.ReadTimeout = 5*time.Second, 5*time.Second
		conn, err := gomysql.NewConnector(c)
		if err != nil {
			return err
		}
		d := sql.OpenDB(conn)
		defer d.Close()
		var f, p, a, b sql.NullString
		return d.QueryRow("SHOW MASTER STATUS").Scan(&f, &p, &a, &b)
	}
	if err := query("false"); err == nil || !strings.Contains(err.Error(), "requires TLS (fix:") {
		t.Fatalf("a plain-text client: %v", err)
	}
	if err := query("skip-verify"); err != nil {
		t.Fatalf("a TLS client: %v", err)
	}
}
