package wire

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHostPolicy: without a list every host is allowed but link-local
// addresses and the metadata services (issue 30: 169.254.169.254 was
// accepted); with a list only what it allows; a sensitive host only when
// an entry names it, never through a broad entry.
func TestHostPolicy(t *testing.T) {
	cases := []struct {
		list  []string
		host  string
		allow bool
	}{
		{nil, "127.0.0.1", true}, // dtm's examples and test suite
		{nil, "localhost", true},
		{nil, "10.1.2.3", true},
		{nil, "busi.example.com", true},
		{nil, "169.254.169.254", false},
		{nil, "169.254.1.1", false},
		{nil, "[fe80::1]", false},
		{nil, "fe80::1%eth0", false},
		{nil, "::ffff:169.254.169.254", false},
		{nil, "fd00:ec2::254", false},
		{nil, "100.100.100.200", false},
		{nil, "metadata.google.internal", false},
		{nil, "METADATA.google.internal.", false},
		{[]string{"*"}, "169.254.169.254", false},
		{[]string{"0.0.0.0/0"}, "169.254.169.254", false},
		{[]string{"169.254.169.254"}, "169.254.169.254", true},
		{[]string{"169.254.0.0/16"}, "169.254.169.254", true},
		{[]string{"metadata.google.internal"}, "metadata.google.internal", true},
		{[]string{"10.0.0.0/8"}, "10.9.9.9", true},
		{[]string{"10.0.0.0/8"}, "127.0.0.1", false},
		{[]string{"10.0.0.0/8"}, "11.0.0.1", false},
		{[]string{"10.0.0.0/8"}, "some.name", true}, // checked again by its addresses when dialed
		{[]string{"*.svc.local"}, "busi.svc.local", true},
		{[]string{"*.svc.local"}, "svc.local.evil.com", false},
		{[]string{"*.svc.local"}, "127.0.0.1", false},
		{[]string{"busi"}, "busi", true},
		{[]string{"busi"}, "other", false},
		{[]string{"::1", "127.0.0.0/8"}, "[::1]", true},
		{[]string{"*"}, "8.8.8.8", true},
	}
	for _, c := range cases {
		p, err := ParseHostPolicy(c.list)
		if err != nil {
			t.Fatalf("%v: %v", c.list, err)
		}
		err = p.AllowHost(c.host)
		if (err == nil) != c.allow {
			t.Errorf("list %v, host %s: err %v, want allowed %v", c.list, c.host, err, c.allow)
		}
		if err != nil && !errors.Is(err, errDenied) {
			t.Errorf("list %v, host %s: %v does not say it is --branch-hosts", c.list, c.host, err)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "*.", "http://x"} {
		if _, err := ParseHostPolicy([]string{bad}); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
}

// TestHostPolicyDial: a name is checked by the addresses it resolves to
// when it is dialed, so that an allowed-looking name cannot lead to a
// denied address.
func TestHostPolicyDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(list []string, host string) error {
		p, err := ParseHostPolicy(list)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.DialContext(ctx, &net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(host, port))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(nil, "localhost"); err != nil {
		t.Fatalf("default policy, localhost: %v", err)
	}
	if err := dial([]string{"127.0.0.0/8"}, "localhost"); err != nil {
		t.Fatalf("localhost by its address: %v", err)
	}
	// The name passes the submit-time check (a CIDR could allow it), but
	// it resolves to loopback, which the list does not allow.
	if err := dial([]string{"10.0.0.0/8"}, "localhost"); err == nil || !strings.Contains(err.Error(), "--branch-hosts") {
		t.Fatalf("localhost under 10.0.0.0/8: %v", err)
	}
	if err := dial([]string{"localhost"}, "localhost"); err != nil {
		t.Fatalf("localhost by name: %v", err)
	}
	if err := dial(nil, "169.254.169.254"); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("metadata address dialed: %v", err)
	}
}

// TestTransportCheckPolicy: Check refuses a denied host without the probe,
// and refuses it before probing (no connection is attempted).
func TestTransportCheckPolicy(t *testing.T) {
	tr := New(nil, Options{})
	defer tr.Close()
	ctx := context.Background()
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:80/x", "http://metadata.google.internal/x"} {
		for _, probe := range []bool{false, true} {
			if err := tr.Check(ctx, u, HTTP, probe); err == nil || !strings.Contains(err.Error(), "--branch-hosts") {
				t.Errorf("%s (probe %v): %v", u, probe, err)
			}
		}
	}
	if err := tr.Check(ctx, "169.254.169.254:80/svc.S/M", GRPC, false); err == nil {
		t.Error("gRPC URL to the metadata address accepted")
	}
	if err := tr.Check(ctx, "http://127.0.0.1:1/x", HTTP, false); err != nil {
		t.Errorf("loopback under the default policy: %v", err)
	}
}
