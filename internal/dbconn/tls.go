package dbconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/sluice-db/sluice"
)

// TLSModes are the values of an endpoint's tls.mode, as the MySQL client's
// --ssl-mode ("" is preferred).
var TLSModes = []string{"disabled", "preferred", "required", "verify-ca", "verify-identity"}

// TLSConfig builds the TLS configuration of ep's connections. nil means
// plaintext; fallback means the server may refuse TLS and the connection
// then goes on in plaintext (mode preferred). role names the endpoint in
// errors ("source", "target").
func TLSConfig(ep sluice.Endpoint, role string) (cfg *tls.Config, fallback bool, err error) {
	t := ep.TLS
	bad := func(field string, e error) error {
		return &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: %s.tls.%s: %v", sluice.ErrConfig, role, field, e),
			Hint: "set " + role + ".tls.mode to one of disabled, preferred, required, verify-ca, verify-identity, and ca/cert/key to readable PEM files"}
	}
	mode := t.Mode
	if mode == "" {
		mode = "preferred"
	}
	if ep.Socket != "" && mode == "preferred" {
		return nil, false, nil // a local socket: nothing to encrypt unless asked
	}
	switch mode {
	case "disabled":
		if t.CA != "" || t.Cert != "" || t.Key != "" {
			return nil, false, bad("mode", errors.New("is disabled while ca, cert or key is set"))
		}
		return nil, false, nil
	case "preferred", "required", "verify-ca", "verify-identity":
	default:
		return nil, false, bad("mode", fmt.Errorf("is %q", t.Mode))
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if (t.Cert == "") != (t.Key == "") {
		return nil, false, bad("cert", errors.New("cert and key go together"))
	}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, false, bad("cert", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	var roots *x509.CertPool
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, false, bad("ca", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, false, bad("ca", fmt.Errorf("%s holds no PEM certificate", t.CA))
		}
	}
	switch mode {
	case "preferred", "required":
		cfg.InsecureSkipVerify = true
		return cfg, mode == "preferred", nil
	case "verify-ca":
		if roots == nil {
			return nil, false, bad("ca", errors.New("is required by verify-ca"))
		}
		// The chain is checked; the name is not (a server reached by an
		// address its certificate does not list).
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyChain(raw, roots)
		}
		return cfg, false, nil
	}
	cfg.RootCAs = roots // nil: the system's
	cfg.ServerName = ep.Host
	if ip := net.ParseIP(ep.Host); ip != nil {
		cfg.ServerName = ip.String()
	}
	return cfg, false, nil
}

func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}
