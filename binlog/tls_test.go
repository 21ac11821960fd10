package binlog_test

import (
	"context"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReaderOverTLSAndSocket: the binlog connection honours the source's
// tls settings (the source requires secure transport, so a stream that
// arrives is encrypted, and verify-identity checks the sandbox's CA), and a
// source given by its unix socket is read through it. Check reports that
// the source serves TLS, which mode preferred then uses.
func TestReaderOverTLSAndSocket(t *testing.T) {
	inst := sandboxtest.Start(t, "btls", sandboxtest.TLS, "require_secure_transport=ON")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE b", "CREATE TABLE b.t (id INT PRIMARY KEY)")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "INSERT INTO b.t VALUES (1), (2)")
	end := masterStatus(t, db)

	verified := config(inst)
	verified.Source.TLS = sluice.TLS{Mode: "verify-identity", CA: inst.CAFile()}
	preferred := config(inst)
	info, err := binlog.Check(context.Background(), preferred)
	if err != nil {
		t.Fatal(err)
	}
	if !info.TLS {
		t.Fatal("Check: the source serves TLS, Info.TLS is false")
	}
	preferred.ServerTLS = info.TLS
	socket := config(inst)
	socket.Source.Socket = inst.Socket()
	for name, cfg := range map[string]binlog.Config{"verify-identity": verified, "preferred": preferred, "socket": socket} {
		r, err := binlog.NewReader(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), sluice.Position{File: start.File, Pos: 4}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows := 0
		for _, ev := range collect(t, r, end) {
			if ev.Header.EventType == replication.WRITE_ROWS_EVENTv1 {
				rows++
			}
		}
		r.Close()
		if rows != 1 {
			t.Errorf("%s: %d row events, want 1", name, rows)
		}
	}
}
