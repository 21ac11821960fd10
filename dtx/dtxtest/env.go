package dtxtest

import (
	"context"
	"database/sql"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// Env is what a test package's TestMain shares: a MariaDB sandbox, a pool
// to it, and the business service on it.
type Env struct {
	Inst *sandbox.Instance
	DB   *sql.DB
	Busi *Busi
	stop func()
}

// NewEnv starts a sandbox named name, sets up the business schema with
// balance on the out account, and starts the service with cfg.
func NewEnv(name string, balance int64, cfg Config) (*Env, error) {
	inst, stop, err := sandboxtest.New(name)
	if err != nil {
		return nil, err
	}
	e := &Env{Inst: inst, stop: stop}
	if e.DB, err = sql.Open("mysql", inst.DSN("")+"?interpolateParams=true"); err == nil {
		e.DB.SetMaxOpenConns(64)
		if err = Setup(context.Background(), e.DB, balance); err == nil {
			e.Busi, err = Start(e.DB, cfg)
		}
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close stops the service and the sandbox.
func (e *Env) Close() {
	if e.Busi != nil {
		e.Busi.Close()
	}
	if e.DB != nil {
		e.DB.Close()
	}
	e.stop()
}
