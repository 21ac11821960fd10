package dbconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// tlsRefusal turns a TLS failure into one line with a fix: the server
// offers no TLS while the endpoint requires it, or its certificate does
// not verify. Without this, "TLS requested but server does not support
// TLS" came with no hint of which setting to change.
func tlsRefusal(err error, role string, ep sluice.Endpoint) error {
	op := "connect to " + role + " " + ep.Addr()
	mode := ep.TLS.Mode
	if mode == "" {
		mode = "preferred"
	}
	if errors.Is(err, mysql.ErrNoTLS) {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s.tls.mode is %s, but the server offers no TLS", sluice.ErrConfig, role, mode),
			Hint: fmt.Sprintf("enable TLS on the %s server (ssl_cert and ssl_key in its config), or set %s.tls.mode to preferred or disabled if an unencrypted connection is acceptable", role, role)}
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(err, &ua), strings.Contains(err.Error(), "certificate signed by unknown authority"):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the %s server's TLS certificate is not signed by %s.tls.ca: %v", sluice.ErrConfig, role, role, oneLine(err)),
			Hint: fmt.Sprintf("set %s.tls.ca to the PEM file of the CA that signed the server's certificate (or tls.mode: required to encrypt without verifying)", role)}
	case errors.As(err, &hn):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the %s server's TLS certificate does not name %s: %v", sluice.ErrConfig, role, ep.Host, oneLine(err)),
			Hint: fmt.Sprintf("set %s.host to a name the certificate lists, or %s.tls.mode to verify-ca (checks the CA, not the name)", role, role)}
	case errors.As(err, &ci):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the %s server's TLS certificate is invalid: %v", sluice.ErrConfig, role, oneLine(err)),
			Hint: "renew the server's certificate (expired or not yet valid), or check the clock of this host"}
	case errors.As(err, &rec):
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: the %s server did not answer in TLS: %v", sluice.ErrConfig, role, oneLine(err)),
			Hint: fmt.Sprintf("check that %s.port is the MySQL port of the server (not a proxy that strips TLS)", role)}
	}
	return nil
}
