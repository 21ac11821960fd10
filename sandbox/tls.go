package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS files of a sandbox started with Config.TLS, under its home.
func (i *Instance) tlsDir() string { return filepath.Join(i.Home, "tls") }

// CAFile is the CA certificate that signed the sandbox's server
// certificate (for a client's tls.ca); empty without TLS.
func (i *Instance) CAFile() string {
	p := filepath.Join(i.tlsDir(), "ca.pem")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// writeTLS makes a CA and a server certificate for 127.0.0.1 and
// localhost, signed by it, unless they exist, and returns the my.cnf lines
// that enable TLS with them.
func (i *Instance) writeTLS() ([]string, error) {
	ca, cert, key, err := makeCerts(i.tlsDir(), "sluice sandbox CA "+i.Name)
	if err != nil {
		return nil, err
	}
	return []string{"ssl_ca=" + ca, "ssl_cert=" + cert, "ssl_key=" + key}, nil
}

// makeCerts writes, under dir unless they exist, a CA (ca.pem) and a
// server certificate for 127.0.0.1 and localhost signed by it
// (server-cert.pem, its key in PKCS#8 server-key.pem), all mode 0600.
func makeCerts(dir, caName string) (ca, cert, key string, err error) {
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server-cert.pem"), filepath.Join(dir, "server-key.pem")
	if _, err := os.Stat(key); err == nil {
		return ca, cert, key, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now, NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		return "", "", "", err
	}
	for path, block := range map[string]*pem.Block{
		ca:   {Type: "CERTIFICATE", Bytes: caDER},
		cert: {Type: "CERTIFICATE", Bytes: srvDER},
		key:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return "", "", "", err
		}
	}
	return ca, cert, key, nil
}
