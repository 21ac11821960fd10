package schema

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestInspectTableDroppedMidway: a table dropped between the reading of
// its columns and its SHOW CREATE TABLE is reported as unknown (which the
// dump takes as "read the tables again"), not as a raw error that stopped
// migrate before its snapshot (difftest bug V, seeds 2040, 2150, 2195).
func TestInspectTableDroppedMidway(t *testing.T) {
	inst := sandboxtest.Start(t, "vanish")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE v", "CREATE TABLE v.t (id INT PRIMARY KEY)")
	var other *sql.DB = sandboxtest.MustOpen(t, inst, "")
	afterColumnsHook = func(ref sluice.TableRef) {
		sandboxtest.MustExec(t, other, "DROP TABLE v.t")
	}
	defer func() { afterColumnsHook = nil }()
	_, err := Inspect(context.Background(), db, sluice.TableRef{Schema: "v", Name: "t"})
	if !errors.Is(err, sluice.ErrUnknownTable) {
		t.Fatalf("inspecting a table dropped midway: %v, want ErrUnknownTable", err)
	}
}
