package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-db/sluice/sandbox"
)

// NewEtcd starts a one-member etcd (Debian's etcd-server) on free loopback
// ports in a private directory, and returns it with a stop function. Use it
// from TestMain, or StartEtcd from a test.
func NewEtcd() (*sandbox.Etcd, func(), error) {
	if Short() {
		return nil, nil, ErrShort
	}
	reapEtcdOrphans()
	dir, err := os.MkdirTemp("", "sbe")
	if err != nil {
		return nil, nil, err
	}
	if err := markOwner(dir); err != nil {
		return nil, nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := sandbox.DefaultEtcdConfig()
		c.Dir, c.Name = dir, "etcd"
		if c.Port, err = sandbox.FreePort(); err != nil {
			return nil, nil, err
		}
		if c.PeerPort, err = sandbox.FreePort(); err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		e, err := sandbox.EtcdUp(ctx, c)
		cancel()
		if err == nil {
			stop := func() {
				_ = e.Kill()
				_ = os.RemoveAll(dir)
			}
			return e, stop, nil
		}
		lastErr = err
		if e, lerr := sandbox.LoadEtcd(dir, "etcd"); lerr == nil {
			_ = e.Kill()
		}
		_ = os.RemoveAll(filepath.Join(dir, "etcd"))
	}
	_ = os.RemoveAll(dir)
	return nil, nil, fmt.Errorf("sandboxtest: start etcd: %w (is etcd-server installed? run 'make deps')", lastErr)
}

// StartEtcd starts an etcd for one test and stops it when the test ends. A
// missing etcd fails the test: CI installs it. Endpoint() is its client URL.
func StartEtcd(tb testing.TB) *sandbox.Etcd {
	tb.Helper()
	SkipShort(tb)
	e, stop, err := NewEtcd()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return e
}

// reapEtcdOrphans stops and removes the etcd members of test processes
// that died without cleaning up.
func reapEtcdOrphans() {
	for _, dir := range deadOwnerDirs("sbe*") {
		if e, err := sandbox.LoadEtcd(dir, "etcd"); err == nil {
			_ = e.Kill()
		}
		_ = os.RemoveAll(dir)
	}
}
