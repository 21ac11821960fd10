package difftest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// Env is one source/target sandbox pair and a sluice binary, shared by
// every seed of a run; each seed works in its own schema, and the schemas
// and sluice_meta are dropped between seeds.
type Env struct {
	Src, Dst     *sandbox.Instance
	SrcDB, DstDB *sql.DB
	// Rep is the native replica (the oracle): a stock MariaDB replica of
	// Src, or nil when the Env was made without it.
	Rep   *sandbox.Instance
	RepDB *sql.DB
	Bin   string // the sluice binary under test
	Dir   string // task directories and logs
	stops []func()
}

// NewEnv starts the two sandboxes, and with oracle a third one that
// replicates the source natively (oracle.go). bin is the sluice binary
// (see Build); dir holds the task directories.
func NewEnv(bin, dir string, oracle bool) (*Env, error) {
	e := &Env{Bin: bin, Dir: dir}
	type inst struct {
		name string
		inst **sandbox.Instance
		db   **sql.DB
	}
	insts := []inst{{"dtsrc", &e.Src, &e.SrcDB}, {"dtdst", &e.Dst, &e.DstDB}}
	if oracle {
		insts = append(insts, inst{"dtrep", &e.Rep, &e.RepDB})
	}
	for _, s := range insts {
		inst, stop, err := sandboxtest.New(s.name)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.stops = append(e.stops, stop)
		*s.inst = inst
		db, err := openDB(inst)
		if err != nil {
			e.Close()
			return nil, err
		}
		*s.db = db
	}
	if oracle {
		if err := e.startReplica(context.Background()); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

func init() {
	// Target restarts break idle connections; the driver's log of each
	// would bury the tester's own lines.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

func openDB(inst *sandbox.Instance) (*sql.DB, error) {
	db, err := sql.Open("mysql", inst.DSN("")+"?charset=utf8mb4&time_zone=%27%2B00%3A00%27&timeout=5s&readTimeout=60s&writeTimeout=60s")
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(time.Minute)
	return db, nil
}

// Close stops the sandboxes.
func (e *Env) Close() {
	for _, db := range []*sql.DB{e.SrcDB, e.DstDB, e.RepDB} {
		if db != nil {
			db.Close()
		}
	}
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// restartTarget stops the target server cleanly and starts it again on the
// same port and data, as an outage of the target would.
func (e *Env) restartTarget(ctx context.Context) error {
	if err := e.Dst.Stop(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("stop target: %w", err)
	}
	return e.startTarget(ctx)
}

// startTarget starts the target if it is down (sandbox.Up returns a
// running instance unchanged).
func (e *Env) startTarget(ctx context.Context) error {
	c := sandbox.DefaultConfig()
	c.Dir, c.Name, c.Port, c.BufferPool = filepath.Dir(e.Dst.Home), e.Dst.Name, e.Dst.Port, "128M"
	if _, err := sandbox.Up(ctx, c); err != nil {
		return fmt.Errorf("start target: %w", err)
	}
	return nil
}

// Build compiles sluice (without -race: it is the system under test, run
// as a child process) into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build sluice: %v: %s", err, out)
	}
	return bin, nil
}
