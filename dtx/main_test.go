package dtx_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/memstore"
	"github.com/sluice-db/sluice/dtx/mysqlstore"
	"github.com/sluice-db/sluice/dtx/redisstore"
	"github.com/sluice-db/sluice/internal/sandboxtest"
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
	if sandboxtest.Short() {
		return m.Run() // make test-unit: the tests that need the servers skip
	}
	env, err := dtxtest.NewEnv("dtx", 1_000_000_000, dtxtest.Config{Barrier: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	defer stopRedis()
	inst, db, busi = env.Inst, env.DB, env.Busi
	return m.Run()
}

// The package's redis-server, started by the first test that wants it.
var (
	redisOnce sync.Once
	redisSrv  *sandboxtest.Redis
	redisErr  error
	stopRedis = func() {}
)

// redisStore opens a store on the package's redis-server, under a key
// prefix of the test's own. A missing redis-server fails the test.
func redisStore(t *testing.T) dtx.Store {
	redisOnce.Do(func() {
		var stop func()
		if redisSrv, stop, redisErr = sandboxtest.NewRedis(); redisErr == nil {
			stopRedis = stop
		}
	})
	if redisErr != nil {
		t.Fatal(redisErr)
	}
	c, err := redisstore.ParseURL(redisSrv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	c.Prefix = "test:" + t.Name() + ":"
	st, err := redisstore.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func boltStore(t *testing.T) dtx.Store {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "dtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mysqlStore(t *testing.T, database string) dtx.Store {
	c := mysqlstore.DefaultConfig()
	c.Endpoint = inst.Endpoint()
	c.Database = database
	st, err := mysqlstore.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// eachStore runs f on each store: bolt, MySQL, Redis and memory (the
// shared store contract).
func eachStore(t *testing.T, f func(t *testing.T, st dtx.Store)) {
	t.Run("bolt", func(t *testing.T) { f(t, boltStore(t)) })
	t.Run("mysql", func(t *testing.T) { f(t, mysqlStore(t, "dtx_"+sanitize(t.Name()))) })
	t.Run("redis", func(t *testing.T) { f(t, redisStore(t)) })
	t.Run("memory", func(t *testing.T) { f(t, memstore.New()) })
}

func sanitize(s string) string {
	out := []byte{}
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return string(out)
}

func serve(t *testing.T, cfg dtx.Config, st dtx.Store) *dtxtest.Server {
	srv, err := dtxtest.Serve(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
