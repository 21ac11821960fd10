package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/procstat"
)

// EtcdConfig describes one etcd sandbox: a single-member etcd from Debian's
// etcd-server package, in DIR/NAME, with client and peer URLs on loopback.
type EtcdConfig struct {
	Dir  string
	Name string
	// Port is the client port; the peer port is PeerPort, or Port+1.
	Port     int
	PeerPort int
	// StartTimeout bounds the wait for the member to answer /health.
	StartTimeout time.Duration
}

// DefaultEtcdConfig returns the config of an etcd sandbox on the usual port.
func DefaultEtcdConfig() EtcdConfig {
	return EtcdConfig{Dir: DefaultDir(), Name: "etcd", Port: 2379, StartTimeout: time.Minute}
}

// Validate checks the config.
func (c EtcdConfig) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "sandbox etcd " + c.Name, Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "/\\ .") {
		return bad("invalid name "+strconv.Quote(c.Name), "use a name of letters, digits, - and _")
	}
	if c.Port <= 0 || c.Port > 65535 {
		return bad(fmt.Sprintf("invalid port %d", c.Port), "use --port between 1 and 65535")
	}
	if c.PeerPort < 0 || c.PeerPort > 65535 || c.PeerPort == c.Port || (c.PeerPort == 0 && c.Port == 65535) {
		return bad(fmt.Sprintf("invalid peer port %d", c.PeerPort), "use --peer-port between 1 and 65535, not the client port")
	}
	if c.Dir == "" {
		return bad("empty state directory", "set --dir or SLUICE_HOME")
	}
	return nil
}

// Etcd is an etcd sandbox as recorded on disk (DIR/NAME/etcd.json).
type Etcd struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	PeerPort int    `json:"peer_port"`
	Home     string `json:"home"`
}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(e.Port) }

// DataDir is the member's data directory.
func (e *Etcd) DataDir() string { return filepath.Join(e.Home, "data") }

// Log is the member's log file.
func (e *Etcd) Log() string { return filepath.Join(e.Home, "etcd.log") }

func (e *Etcd) pidFile() string { return filepath.Join(e.Home, "etcd.pid") }

const etcdRecord = "etcd.json"

// EtcdUp creates (first time) and starts an etcd sandbox and returns once
// it answers /health. A running sandbox is returned unchanged.
func EtcdUp(ctx context.Context, c EtcdConfig) (*Etcd, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PeerPort == 0 {
		c.PeerPort = c.Port + 1
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = time.Minute
	}
	home, err := filepath.Abs(filepath.Join(c.Dir, c.Name))
	if err != nil {
		return nil, err
	}
	op := "sandbox etcd up " + c.Name
	if _, err := os.Stat(filepath.Join(home, "sandbox.json")); err == nil {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s is a MariaDB sandbox", sluice.ErrConfig, c.Name), Hint: "choose another --name"}
	}
	e := &Etcd{Name: c.Name, Port: c.Port, PeerPort: c.PeerPort, Home: home}
	if prev, err := LoadEtcd(c.Dir, c.Name); err == nil {
		if prev.Port != c.Port {
			return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: etcd sandbox exists on port %d", sluice.ErrConfig, prev.Port),
				Hint: fmt.Sprintf("use --port %d, or remove it with 'sluice sandbox etcd down --name %s --purge'", prev.Port, c.Name)}
		}
		e = prev
		if _, ok := e.Running(); ok {
			return e, e.waitHealthy(ctx, c.StartTimeout, nil)
		}
	}
	for _, p := range []int{e.Port, e.PeerPort} {
		if err := checkPortFree(p); err != nil {
			return nil, &sluice.Error{Op: op, Err: err, Hint: "choose another --port (the peer port is --port+1 unless --peer-port is given)"}
		}
	}
	bin, err := findBinary("etcd")
	if err != nil {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: etcd not found", sluice.ErrConfig), Hint: "install it: apt-get install -y etcd-server (or run 'make deps')"}
	}
	if err := os.MkdirAll(e.Home, 0o700); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(e.Home, etcdRecord), e); err != nil {
		return nil, err
	}
	return e, e.start(ctx, bin, c.StartTimeout)
}

func (e *Etcd) start(ctx context.Context, bin string, timeout time.Duration) error {
	client := e.Endpoint()
	peer := "http://127.0.0.1:" + strconv.Itoa(e.PeerPort)
	logf, err := os.OpenFile(e.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	closeInheritedOnExec()
	cmd := exec.Command(bin,
		"--name", e.Name, "--data-dir", e.DataDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", e.Name+"="+peer, "--initial-cluster-state", "new",
		"--initial-cluster-token", "sluice-"+e.Name)
	cmd.Stdout, cmd.Stderr = logf, logf
	// etcd 3.4 refuses to start on architectures other than amd64 and
	// ppc64le unless told this; on those two the variable is ignored.
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	// A session of its own, so the member outlives the CLI and a terminal's ^C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox etcd %s: start %s: %w", e.Name, bin, err)
	}
	if err := os.WriteFile(e.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	// Reap the child if it exits while this process lives (tests).
	go func() { exited <- cmd.Wait() }()
	return e.waitHealthy(ctx, timeout, exited)
}

// waitHealthy polls /health until the member reports healthy (it has a
// leader: one member elects itself in about a second).
func (e *Etcd) waitHealthy(ctx context.Context, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		last = e.health(ctx, hc)
		if last == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("sandbox etcd %s: etcd exited during start-up (%v): %s", e.Name, werr, lastLines(readFile(e.Log()), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox etcd %s: not healthy after %s: %v; see %s", e.Name, timeout, last, e.Log())
		}
	}
}

func (e *Etcd) health(ctx context.Context, hc *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Endpoint()+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return errors.New("etcd reports unhealthy")
	}
	return nil
}

// Running returns the member's pid and whether it is alive.
func (e *Etcd) Running() (int, bool) {
	b, err := os.ReadFile(e.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !alive(pid) {
		return 0, false
	}
	// The pid may have been reused by another program since.
	if !strings.HasPrefix(procstat.Comm(pid), "etcd") {
		return 0, false
	}
	return pid, true
}

// Stop stops the member (SIGTERM, SIGKILL after timeout) and waits for it.
func (e *Etcd) Stop(ctx context.Context, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	pid, ok := e.Running()
	if !ok {
		_ = os.Remove(e.pidFile())
		return nil
	}
	return stopProcess(ctx, pid, timeout, e.pidFile())
}

// Kill stops the member with SIGKILL (a crash) and waits until it is gone.
func (e *Etcd) Kill() error {
	pid, ok := e.Running()
	if !ok {
		return nil
	}
	if err := killProcess(pid); err != nil {
		return err
	}
	_ = os.Remove(e.pidFile())
	return nil
}

// Restart starts a stopped member again on its ports and data directory.
func (e *Etcd) Restart(ctx context.Context, timeout time.Duration) error {
	if _, ok := e.Running(); ok {
		return nil
	}
	bin, err := findBinary("etcd")
	if err != nil {
		return err
	}
	if timeout == 0 {
		timeout = time.Minute
	}
	return e.start(ctx, bin, timeout)
}

// EtcdDown stops an etcd sandbox and, with purge, removes its directory.
func EtcdDown(ctx context.Context, dir, name string, purge bool, timeout time.Duration) error {
	e, err := LoadEtcd(dir, name)
	if err != nil {
		return err
	}
	if err := e.Stop(ctx, timeout); err != nil {
		return err
	}
	if purge {
		return os.RemoveAll(e.Home)
	}
	return nil
}

// LoadEtcd reads an etcd sandbox's record from DIR/NAME/etcd.json.
func LoadEtcd(dir, name string) (*Etcd, error) {
	var e Etcd
	p := filepath.Join(dir, name, etcdRecord)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &sluice.Error{Op: "sandbox etcd " + name, Err: fmt.Errorf("%w: no such etcd sandbox in %s", sluice.ErrConfig, dir),
				Hint: "start one with 'sluice sandbox etcd up --name " + name + " --port P', or check --dir/SLUICE_HOME"}
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("sandbox etcd %s: corrupt %s: %w", name, p, err)
	}
	return &e, nil
}

// Addr is the client host:port.
func (e *Etcd) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.Port)) }
