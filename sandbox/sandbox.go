// Package sandbox starts and stops local MariaDB instances from the installed
// server binaries. Each instance lives in DIR/NAME (config, datadir, socket,
// pid file, error log) and listens on loopback only. Instances come up ready
// for replication: ROW binlog with full images and full row metadata, GTIDs
// in strict mode, a distinct server_id, root with an empty password on
// 127.0.0.1 and a "repl" user with replication privileges.
package sandbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/procstat"
)

// Config describes one sandbox instance.
type Config struct {
	Dir      string // state directory holding all instances
	Name     string
	Port     int
	ServerID uint32 // 0: derived from the port
	// DomainID is gtid_domain_id; give sources that feed one stream distinct ids.
	DomainID uint32
	// BufferPool is innodb_buffer_pool_size, e.g. "512M".
	BufferPool string
	// Options are extra my.cnf lines for [mariadbd], "key=value" or "key".
	Options []string
	// StartTimeout bounds the wait for the server to accept connections.
	StartTimeout time.Duration
	// TLS makes a CA and a server certificate for 127.0.0.1 (in the
	// instance's tls/ directory; Instance.CAFile) and serves TLS with them.
	TLS bool
}

// DefaultConfig returns a Config for NAME on PORT under the default state dir.
func DefaultConfig() Config {
	return Config{Dir: DefaultDir(), Name: "sandbox", Port: 3307, BufferPool: "512M", StartTimeout: 120 * time.Second}
}

// DefaultDir is $SLUICE_HOME or ~/.sluice.
func DefaultDir() string {
	if d := os.Getenv("SLUICE_HOME"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".sluice")
	}
	return ".sluice"
}

var bufferPoolForm = regexp.MustCompile(`^[0-9]+[KMGkmg]?$`)

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "sandbox " + c.Name, Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\\ .") {
		return bad("invalid name "+strconv.Quote(c.Name), "use a name of letters, digits, - and _")
	}
	if c.Port <= 0 || c.Port > 65535 {
		return bad(fmt.Sprintf("invalid port %d", c.Port), "use --port between 1 and 65535")
	}
	if c.Dir == "" {
		return bad("empty state directory", "set --dir or SLUICE_HOME")
	}
	// A size the server cannot read failed deep in mariadb-install-db, with
	// its banner for a message and no fix.
	if c.BufferPool != "" && !bufferPoolForm.MatchString(c.BufferPool) {
		return bad("invalid buffer pool size "+strconv.Quote(c.BufferPool), "use --buffer-pool with a size such as 128M or 2G")
	}
	// A unix socket path is limited to 107 bytes.
	if abs, _ := filepath.Abs(c.Dir); len(abs)+len(c.Name)+20 > 107 {
		return bad("state directory path too long for a unix socket", "use a shorter --dir")
	}
	return nil
}

// Instance is a sandbox as recorded on disk.
type Instance struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	ServerID uint32 `json:"server_id"`
	Home     string `json:"home"`
}

// Host is always loopback.
func (i *Instance) Host() string { return "127.0.0.1" }

// Endpoint is the root endpoint over TCP.
func (i *Instance) Endpoint() sluice.Endpoint {
	return sluice.Endpoint{Host: "127.0.0.1", Port: i.Port, User: "root"}
}

// DSN is a go-sql-driver DSN for root over TCP to database db (may be empty).
func (i *Instance) DSN(db string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", i.Port, db)
}

// Socket is the unix socket path.
func (i *Instance) Socket() string { return filepath.Join(i.Home, "mysqld.sock") }

func (i *Instance) pidFile() string  { return filepath.Join(i.Home, "mysqld.pid") }
func (i *Instance) cnf() string      { return filepath.Join(i.Home, "my.cnf") }
func (i *Instance) datadir() string  { return filepath.Join(i.Home, "data") }
func (i *Instance) ErrorLog() string { return filepath.Join(i.Home, "error.log") }

// Up creates (first time) and starts the instance, and returns once it accepts
// connections. If it is already running, Up returns it unchanged.
func Up(ctx context.Context, c Config) (*Instance, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 120 * time.Second
	}
	home, err := filepath.Abs(filepath.Join(c.Dir, c.Name))
	if err != nil {
		return nil, err
	}
	inst := &Instance{Name: c.Name, Port: c.Port, ServerID: c.ServerID, Home: home}
	if inst.ServerID == 0 {
		inst.ServerID = uint32(c.Port)
	}
	if prev, err := Load(c.Dir, c.Name); err == nil {
		if prev.Port != c.Port {
			return nil, &sluice.Error{Op: "sandbox up " + c.Name, Err: fmt.Errorf("%w: instance exists on port %d", sluice.ErrConfig, prev.Port),
				Hint: fmt.Sprintf("use --port %d, or remove it with 'sluice sandbox down --name %s --purge'", prev.Port, c.Name)}
		}
		inst = prev
		if _, ok := inst.Running(); ok {
			return inst, waitReady(ctx, inst, c.StartTimeout)
		}
	}
	if err := checkPortFree(c.Port); err != nil {
		return nil, &sluice.Error{Op: "sandbox up " + c.Name, Err: err, Hint: "choose another --port"}
	}
	mariadbd, err := findBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if c.TLS {
		lines, err := inst.writeTLS()
		if err != nil {
			return nil, fmt.Errorf("sandbox up %s: make TLS certificates: %w", c.Name, err)
		}
		c.Options = append(lines, c.Options...)
	}
	if err := os.WriteFile(inst.cnf(), []byte(renderCnf(inst, c)), 0o644); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(home, "sandbox.json"), inst); err != nil {
		return nil, err
	}
	fresh := false
	if _, err := os.Stat(filepath.Join(inst.datadir(), "mysql")); errors.Is(err, os.ErrNotExist) {
		fresh = true
		installDB, err := findBinary("mariadb-install-db", "mysql_install_db")
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, installDB, "--defaults-file="+inst.cnf(), "--skip-test-db",
			"--auth-root-authentication-method=normal", "--user=root")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("sandbox %s: mariadb-install-db failed: %v: %s", c.Name, err, lastLines(string(out), 5))
		}
	}
	logf, err := os.OpenFile(filepath.Join(home, "mariadbd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	closeInheritedOnExec()
	cmd := exec.Command(mariadbd, "--defaults-file="+inst.cnf())
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own, so the server outlives the CLI and a terminal's ^C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox %s: start %s: %w", c.Name, mariadbd, err)
	}
	exited := make(chan error, 1)
	// Reap the child if it exits while this process lives (tests), so it does
	// not linger as a zombie that still looks alive to kill(pid, 0).
	go func() { exited <- cmd.Wait() }()
	if err := waitStarted(ctx, inst, c.StartTimeout, exited); err != nil {
		return nil, err
	}
	if fresh {
		if err := bootstrapUsers(ctx, inst); err != nil {
			return nil, err
		}
	}
	return inst, waitReady(ctx, inst, c.StartTimeout)
}

func renderCnf(inst *Instance, c Config) string {
	bp := c.BufferPool
	if bp == "" {
		bp = "512M"
	}
	lines := []string{
		"[client]",
		"socket=" + inst.Socket(),
		"port=" + strconv.Itoa(inst.Port),
		"[mariadbd]",
		"user=root",
		"basedir=/usr",
		"datadir=" + inst.datadir(),
		"tmpdir=" + filepath.Join(inst.Home, "tmp"),
		"socket=" + inst.Socket(),
		"pid-file=" + inst.pidFile(),
		"log-error=" + inst.ErrorLog(),
		"port=" + strconv.Itoa(inst.Port),
		"bind-address=127.0.0.1",
		"skip-name-resolve",
		"server_id=" + strconv.FormatUint(uint64(inst.ServerID), 10),
		"gtid_domain_id=" + strconv.FormatUint(uint64(c.DomainID), 10),
		"log_bin=mysql-bin",
		"log_slave_updates=ON",
		"binlog_format=ROW",
		"binlog_row_image=FULL",
		"binlog_row_metadata=FULL",
		"gtid_strict_mode=ON",
		"character_set_server=utf8mb4",
		"collation_server=utf8mb4_general_ci",
		"innodb_buffer_pool_size=" + bp,
		"innodb_log_file_size=256M",
		"max_allowed_packet=1G",
		"max_connections=1000",
		"local_infile=ON",
		"secure_file_priv=",
		"skip-external-locking",
		"performance_schema=OFF",
	}
	lines = append(lines, c.Options...)
	return strings.Join(lines, "\n") + "\n"
}

// bootstrapUsers creates the TCP users. It runs with sql_log_bin=0 so a new
// sandbox's binlog holds only what tests and users write.
func bootstrapUsers(ctx context.Context, inst *Instance) error {
	db, err := openSocket(inst)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{
		"SET SESSION sql_log_bin=0",
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
		"CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, SELECT, RELOAD, SHOW VIEW ON *.* TO 'repl'@'127.0.0.1'",
		"FLUSH PRIVILEGES",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sandbox %s: bootstrap %q: %w", inst.Name, q, err)
		}
	}
	return nil
}

func openSocket(inst *Instance) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "unix"
	c.Addr = inst.Socket()
	c.Timeout = 2 * time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// waitStarted waits until the socket accepts root, failing fast if the
// server process exits first (bad config, port taken).
func waitStarted(ctx context.Context, inst *Instance, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	db, err := openSocket(inst)
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("sandbox %s: mariadbd exited during start-up (%v): %s", inst.Name, werr, lastLines(readFile(inst.ErrorLog()), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox %s: not accepting connections after %s: %v; see %s", inst.Name, timeout, err, inst.ErrorLog())
		}
	}
}

// waitReady waits until root can log in over TCP, the path every user takes.
func waitReady(ctx context.Context, inst *Instance, timeout time.Duration) error {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.Timeout = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", inst.Port), 2*time.Second
	c.TLSConfig = "preferred" // a --tls sandbox may require secure transport
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("sandbox %s: root cannot log in on 127.0.0.1:%d: %v", inst.Name, inst.Port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running returns the server's pid and whether it is alive.
func (i *Instance) Running() (int, bool) {
	b, err := os.ReadFile(i.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, alive(pid)
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is dead for our purposes.
	st := procstat.State(pid)
	return st != "" && st != "Z"
}

// Down stops the instance by its own pid (SIGTERM, then SIGKILL after
// timeout) and, with purge, removes its directory.
func Down(ctx context.Context, dir, name string, purge bool, timeout time.Duration) error {
	inst, err := Load(dir, name)
	if err != nil {
		return err
	}
	if err := inst.Stop(ctx, timeout); err != nil {
		return err
	}
	if purge {
		return os.RemoveAll(inst.Home)
	}
	return nil
}

// Stop stops the server and waits for it to exit.
func (i *Instance) Stop(ctx context.Context, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	pid, ok := i.Running()
	if !ok {
		return nil
	}
	return stopProcess(ctx, pid, timeout, i.pidFile())
}

// Kill sends SIGKILL to the server (crash tests) and waits for it to die.
func (i *Instance) Kill() error {
	pid, ok := i.Running()
	if !ok {
		return nil
	}
	if err := killProcess(pid); err != nil {
		return err
	}
	return nil
}

// Load reads an instance's record from DIR/NAME/sandbox.json.
func Load(dir, name string) (*Instance, error) {
	var inst Instance
	b, err := os.ReadFile(filepath.Join(dir, name, "sandbox.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &sluice.Error{Op: "sandbox " + name, Err: fmt.Errorf("%w: no such sandbox in %s", sluice.ErrConfig, dir), Hint: "run 'sluice sandbox list' to see the sandboxes, or check --dir/SLUICE_HOME"}
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &inst); err != nil {
		return nil, fmt.Errorf("sandbox %s: corrupt %s: %w", name, filepath.Join(dir, name, "sandbox.json"), err)
	}
	return &inst, nil
}

// List returns every instance recorded under dir, sorted by name.
func List(dir string) ([]*Instance, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Instance
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if inst, err := Load(dir, e.Name()); err == nil {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

func findBinary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"} {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	return "", &sluice.Error{Op: "sandbox", Err: fmt.Errorf("%w: %s not found", sluice.ErrConfig, names[0]),
		Hint: "install MariaDB: apt-get install -y mariadb-server mariadb-client"}
}

func checkPortFree(port int) error {
	l, err := listenLoopback(port)
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is in use", port)
	}
	return l.Close()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
