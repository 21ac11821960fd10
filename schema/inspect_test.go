package schema_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/schema"
)

func TestInspect(t *testing.T) {
	inst := sandboxtest.Start(t, "inspect")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.pk (a INT UNSIGNED NOT NULL, b VARCHAR(10), c INT AS (a+1) VIRTUAL, u INT, PRIMARY KEY (b, a), UNIQUE KEY (u))",
		"CREATE TABLE d.uk (x INT NULL, y INT NOT NULL, UNIQUE KEY kx (x), UNIQUE KEY ky (y))",
		"CREATE TABLE d.nokey (x INT)",
		"CREATE VIEW d.v AS SELECT 1",
	)
	ctx := context.Background()
	refs, err := schema.ListTables(ctx, db, func(r sluice.TableRef) bool { return r.Schema == "d" })
	if err != nil || len(refs) != 3 {
		t.Fatalf("ListTables = %v, %v", refs, err)
	}
	pk, err := schema.Inspect(ctx, db, sluice.TableRef{Schema: "d", Name: "pk"})
	if err != nil {
		t.Fatal(err)
	}
	if !pk.PKIsPrimary || len(pk.PK) != 2 || pk.Columns[pk.PK[0]].Name != "b" || pk.Columns[pk.PK[1]].Name != "a" {
		t.Fatalf("pk = %+v", pk.PK)
	}
	if !pk.Columns[0].Unsigned || !pk.Columns[2].Generated || len(pk.UniqueKeys) != 2 || len(pk.WritableColumns()) != 3 {
		t.Fatalf("columns = %+v keys %v", pk.Columns, pk.UniqueKeys)
	}
	uk, _ := schema.Inspect(ctx, db, sluice.TableRef{Schema: "d", Name: "uk"})
	if uk.PKIsPrimary || len(uk.PK) != 1 || uk.Columns[uk.PK[0]].Name != "y" {
		t.Fatalf("uk = %+v", uk.PK)
	}
	nk, _ := schema.Inspect(ctx, db, sluice.TableRef{Schema: "d", Name: "nokey"})
	if nk.HasKey() {
		t.Fatal("nokey has key")
	}
	_, err = schema.Inspect(ctx, db, sluice.TableRef{Schema: "d", Name: "missing"})
	if !errors.Is(err, sluice.ErrUnknownTable) {
		t.Fatalf("missing: %v", err)
	}
}
