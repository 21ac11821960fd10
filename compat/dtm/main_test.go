// Package compat drives sluice's coordinator with dtm's own Go client
// (dtmcli from github.com/dtm-labs/dtm v1.19.0): every mode, on both stores,
// against a real business service on sandbox MariaDB. It is a separate
// module so that dtm's dependencies stay out of sluice's go.mod.
package compat

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/mysqlstore"
	"github.com/sluice-db/sluice/sandbox"
)

var (
	inst *sandbox.Instance
	db   *sql.DB
	busi *dtxtest.Busi
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := dtxtest.NewEnv("dtmcompat", 1_000_000, dtxtest.Config{Barrier: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	inst, db, busi = env.Inst, env.DB, env.Busi
	return m.Run()
}

// stores runs f once per store kind, each with a fresh coordinator.
func stores(t *testing.T, f func(t *testing.T, dtm string)) {
	t.Run("bolt", func(t *testing.T) {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "dtx.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		serve(t, st, f)
	})
	t.Run("mysql", func(t *testing.T) {
		c := mysqlstore.DefaultConfig()
		c.Endpoint = inst.Endpoint()
		c.Database = "dtx_compat"
		st, err := mysqlstore.Open(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		serve(t, st, f)
	})
}

func serve(t *testing.T, st dtx.Store, f func(t *testing.T, dtm string)) {
	srv, err := dtxtest.Serve(dtxtest.FastConfig(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f(t, srv.URL)
}
