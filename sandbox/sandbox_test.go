package sandbox_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

func TestUpIsReplicationReadyAndDownStops(t *testing.T) {
	inst := sandboxtest.Start(t, "s1")
	db := sandboxtest.MustOpen(t, inst, "")
	want := map[string]string{
		"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
		"binlog_row_metadata": "FULL", "gtid_strict_mode": "ON", "bind_address": "127.0.0.1",
	}
	for k, v := range want {
		var name, got string
		if err := db.QueryRow("SHOW GLOBAL VARIABLES LIKE ?", k).Scan(&name, &got); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	var sid uint32
	if err := db.QueryRow("SELECT @@server_id").Scan(&sid); err != nil || sid != inst.ServerID {
		t.Fatalf("server_id = %d (%v), want %d", sid, err, inst.ServerID)
	}
	var grants string
	if err := db.QueryRow("SHOW GRANTS FOR 'repl'@'127.0.0.1'").Scan(&grants); err != nil {
		t.Fatal(err)
	}
	// Up again on a running instance is a no-op that returns it.
	c := sandbox.DefaultConfig()
	c.Dir, c.Name, c.Port = inst.Home[:len(inst.Home)-len(inst.Name)-1], inst.Name, inst.Port
	again, err := sandbox.Up(context.Background(), c)
	if err != nil || again.Port != inst.Port {
		t.Fatalf("second up: %v", err)
	}
	list, err := sandbox.List(c.Dir)
	if err != nil || len(list) != 1 || list[0].Name != "s1" {
		t.Fatalf("list = %v, %v", list, err)
	}
	if err := sandbox.Down(context.Background(), c.Dir, inst.Name, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok := inst.Running(); ok {
		t.Fatal("still running after down")
	}
	if db.Ping() == nil {
		t.Fatal("server still answers after down")
	}
	// A warm restart keeps data; purge removes the directory.
	if _, err := sandbox.Up(context.Background(), c); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := sandbox.Down(context.Background(), c.Dir, inst.Name, true, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Home); !os.IsNotExist(err) {
		t.Fatalf("home not purged: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	c := sandbox.DefaultConfig()
	c.Name = "a/b"
	if _, err := sandbox.Up(context.Background(), c); err == nil {
		t.Fatal("want error for bad name")
	}
	c.Name, c.Port = "x", 70000
	if _, err := sandbox.Up(context.Background(), c); err == nil {
		t.Fatal("want error for bad port")
	}
}
