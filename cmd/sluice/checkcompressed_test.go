package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCheckCompressedColumns: replication cannot read MariaDB's COMPRESSED
// columns, so sluice check names them and a replicating migrate refuses
// to start; a copy alone reads them with SELECT. Before the check, the
// task started and stopped at the table's first row with go-mysql's bare
// "unsupport type 140".
func TestCheckCompressedColumns(t *testing.T) {
	inst := sandboxtest.Start(t, "czchk")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE zsrc", "CREATE TABLE zsrc.t (id INT PRIMARY KEY, b BLOB COMPRESSED)", "CREATE DATABASE zdst")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "zsrc", "vdst", "zdst", "name: vt", "name: czchk").Replace(
		verifyTaskYAML(ep, ep, "zsrc.*", "dir: "+t.TempDir()+"\n")))
	out, _, err := runCLI(t, "check", "--config", cfg)
	if !errors.Is(err, ErrChecksFailed) || !strings.Contains(out, "fail  compressed columns") || !strings.Contains(out, "zsrc.t.b") {
		t.Fatalf("check with a COMPRESSED column: %v\n%s", err, out)
	}
	if out, _, _ := runCLI(t, "check", "--config", cfg, "--mode", "full"); strings.Contains(out, "compressed columns") {
		t.Fatalf("check --mode full names the COMPRESSED column, which a copy reads:\n%s", out)
	}
	for _, mode := range []string{"all", "incremental"} {
		if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", mode); !errors.Is(err, decode.ErrCompressedColumn) || !strings.Contains(err.Error(), "zsrc.t.b") {
			t.Fatalf("migrate --mode %s with a COMPRESSED column: %v", mode, err)
		}
	}
}
