package sandbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/procstat"
)

// TiDBConfig describes one TiDB sandbox: a single tidb-server in unistore
// mode (its own storage engine in the process: no PD, no TiKV), the way
// TiDB's own integration tests run it, on loopback.
type TiDBConfig struct {
	Dir  string // state directory holding all instances (shared with the MariaDB sandboxes)
	Name string
	Port int // MySQL protocol port on 127.0.0.1
	// StatusPort is TiDB's HTTP status port; 0 picks a free one the first time.
	StatusPort int
	// Cache is where tidb-server is built and kept (TiDBCacheDir).
	Cache string
	// Progress receives the build's progress lines (the first run builds).
	Progress io.Writer
	// StartTimeout bounds the wait for the server to answer SELECT 1.
	StartTimeout time.Duration
	// DieWithParent kills the server when the starting process dies (tests);
	// the CLI's server outlives the command instead.
	DieWithParent bool
}

// DefaultTiDBConfig returns the defaults: port 4000, the user's cache.
func DefaultTiDBConfig() TiDBConfig {
	return TiDBConfig{Dir: DefaultDir(), Name: "tidb", Port: 4000, Cache: TiDBCacheDir(), StartTimeout: 2 * time.Minute}
}

// Validate checks the config.
func (c TiDBConfig) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "sandbox tidb " + c.Name, Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\\ .") {
		return bad("invalid name "+strconv.Quote(c.Name), "use a name of letters, digits, - and _")
	}
	if c.Port <= 0 || c.Port > 65535 {
		return bad(fmt.Sprintf("invalid port %d", c.Port), "use --port between 1 and 65535")
	}
	if c.StatusPort < 0 || c.StatusPort > 65535 || c.StatusPort == c.Port {
		return bad(fmt.Sprintf("invalid status port %d", c.StatusPort), "use another --status-port, or 0 for a free one")
	}
	if c.Dir == "" || c.Cache == "" {
		return bad("empty state or cache directory", "set --dir or SLUICE_HOME")
	}
	return nil
}

// TiDB is a TiDB sandbox as recorded on disk (DIR/NAME/tidb.json).
type TiDB struct {
	Name       string `json:"name"`
	Port       int    `json:"port"`
	StatusPort int    `json:"status_port"`
	Home       string `json:"home"`
	Binary     string `json:"binary"`
}

const tidbRecord = "tidb.json"

// Addr is the MySQL protocol host:port.
func (t *TiDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port)) }

// Endpoint is the target endpoint: root with no password, as TiDB starts.
func (t *TiDB) Endpoint() sluice.Endpoint {
	return sluice.Endpoint{Host: "127.0.0.1", Port: t.Port, User: "root"}
}

// DSN is a go-sql-driver DSN for root on db.
func (t *TiDB) DSN(db string) string {
	return fmt.Sprintf("root@tcp(%s)/%s", t.Addr(), db)
}

// Log is the server's log file.
func (t *TiDB) Log() string { return filepath.Join(t.Home, "tidb.log") }

func (t *TiDB) pidFile() string { return filepath.Join(t.Home, "tidb.pid") }
func (t *TiDB) dataDir() string { return filepath.Join(t.Home, "data") }
func (t *TiDB) conf() string    { return filepath.Join(t.Home, "tidb.toml") }

// TiDBUp builds tidb-server the first time (into c.Cache), creates the
// sandbox the first time, starts it and returns once it answers SELECT 1.
// A running sandbox is returned unchanged.
func TiDBUp(ctx context.Context, c TiDBConfig) (*TiDB, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	home, err := filepath.Abs(filepath.Join(c.Dir, c.Name))
	if err != nil {
		return nil, err
	}
	op := "sandbox tidb up " + c.Name
	for _, other := range []string{"sandbox.json", etcdRecord, "kafka.json"} {
		if _, err := os.Stat(filepath.Join(home, other)); err == nil {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s is another kind of sandbox (%s)", sluice.ErrConfig, c.Name, other), Hint: "choose another --name"}
		}
	}
	t := &TiDB{Name: c.Name, Port: c.Port, StatusPort: c.StatusPort, Home: home}
	if prev, err := LoadTiDB(c.Dir, c.Name); err == nil {
		if prev.Port != c.Port {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: TiDB sandbox exists on port %d", sluice.ErrConfig, prev.Port),
				Hint: fmt.Sprintf("use --port %d, or remove it with 'sluice sandbox tidb down --name %s --purge'", prev.Port, c.Name)}
		}
		t = prev
		if _, ok := t.Running(); ok {
			return t, t.waitReady(ctx, c.StartTimeout, nil)
		}
	}
	bin, err := TiDBBinary(ctx, c.Cache, c.Progress)
	if err != nil {
		return nil, err
	}
	t.Binary = bin
	if t.StatusPort == 0 {
		if t.StatusPort, err = FreePort(); err != nil {
			return nil, err
		}
	}
	for _, p := range []int{t.Port, t.StatusPort} {
		if err := checkPortFree(p); err != nil {
			return nil, &sluice.Error{Op: op, Err: err, Hint: "choose another --port (or --status-port)"}
		}
	}
	if err := os.MkdirAll(t.dataDir(), 0o700); err != nil {
		return nil, err
	}
	// Temporary files, the slow log and the socket stay in the sandbox's
	// directory, not in /tmp where two sandboxes would share them.
	conf := fmt.Sprintf("temp-dir = %q\ntmp-storage-path = %q\n[log]\nslow-query-file = %q\n",
		filepath.Join(home, "tmp"), filepath.Join(home, "tmp-storage"), filepath.Join(home, "tidb-slow.log"))
	if err := os.WriteFile(t.conf(), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(home, tidbRecord), t); err != nil {
		return nil, err
	}
	return t, t.start(ctx, c.StartTimeout, c.DieWithParent)
}

func (t *TiDB) start(ctx context.Context, timeout time.Duration, dieWithParent bool) error {
	logf, err := os.OpenFile(filepath.Join(t.Home, "tidb.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	closeInheritedOnExec()
	cmd := exec.Command(t.Binary,
		"-store", "unistore", "-path", t.dataDir(),
		"-host", "127.0.0.1", "-P", strconv.Itoa(t.Port),
		"-status-host", "127.0.0.1", "-status", strconv.Itoa(t.StatusPort),
		"-socket", "", "-config", t.conf(), "-log-file", t.Log(), "-L", "warn")
	cmd.Dir = t.Home
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox tidb %s: start %s: %w", t.Name, t.Binary, err)
	}
	if err := os.WriteFile(t.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	// Reap the child if it exits while this process lives (tests).
	go func() { exited <- cmd.Wait() }()
	return t.waitReady(ctx, timeout, exited)
}

// waitReady polls SELECT 1 over the MySQL protocol (about 3 s after start).
func (t *TiDB) waitReady(ctx context.Context, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	db, err := sql.Open("mysql", t.DSN("")+"?timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		last = db.PingContext(pctx)
		if last == nil {
			_, last = db.ExecContext(pctx, "SELECT 1")
		}
		cancel()
		if last == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("sandbox tidb %s: tidb-server exited during start-up (%v): %s; see %s", t.Name, werr,
				lastLines(readFile(filepath.Join(t.Home, "tidb.out"))+"\n"+readFile(t.Log()), 3), t.Log())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox tidb %s: not answering after %s: %v; see %s", t.Name, timeout, last, t.Log())
		}
	}
}

// Running returns the server's pid and whether it is alive.
func (t *TiDB) Running() (int, bool) {
	b, err := os.ReadFile(t.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !alive(pid) {
		return 0, false
	}
	// The pid may have been reused by another program since.
	if !strings.HasPrefix(procstat.Comm(pid), "tidb-server") {
		return 0, false
	}
	return pid, true
}

// Stop stops the server (SIGTERM, SIGKILL after timeout) and waits for it.
func (t *TiDB) Stop(ctx context.Context, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	pid, ok := t.Running()
	if !ok {
		_ = os.Remove(t.pidFile())
		return nil
	}
	return stopProcess(ctx, pid, timeout, t.pidFile())
}

// Restart starts a stopped server again on its ports and data.
func (t *TiDB) Restart(ctx context.Context, timeout time.Duration) error {
	if _, ok := t.Running(); ok {
		return nil
	}
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	return t.start(ctx, timeout, false)
}

// TiDBDown stops a TiDB sandbox and, with purge, removes its directory.
func TiDBDown(ctx context.Context, dir, name string, purge bool, timeout time.Duration) error {
	t, err := LoadTiDB(dir, name)
	if err != nil {
		return err
	}
	if err := t.Stop(ctx, timeout); err != nil {
		return err
	}
	if purge {
		return os.RemoveAll(t.Home)
	}
	return nil
}

// LoadTiDB reads a TiDB sandbox's record from DIR/NAME/tidb.json.
func LoadTiDB(dir, name string) (*TiDB, error) {
	var t TiDB
	p := filepath.Join(dir, name, tidbRecord)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &sluice.Error{Op: "sandbox tidb " + name, Err: fmt.Errorf("%w: no such TiDB sandbox in %s", sluice.ErrConfig, dir),
				Hint: "start one with 'sluice sandbox tidb up --name " + name + " --port P', or check --dir/SLUICE_HOME"}
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("sandbox tidb %s: corrupt %s: %w", name, p, err)
	}
	return &t, nil
}
