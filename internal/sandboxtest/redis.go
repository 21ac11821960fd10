package sandboxtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/procstat"
	"github.com/sluice-db/sluice/sandbox"
)

// Redis is a redis-server started for tests: loopback only, a free port,
// a private directory, a password, and an append-only file synced before
// every answer (appendfsync always), unless the options say otherwise.
type Redis struct {
	Port     int
	Password string
	Dir      string
	args     []string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *os.File
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// URL is a redis:// URL of database db, with the password in it (tests only).
func (r *Redis) URL(db int) string {
	return fmt.Sprintf("redis://:%s@%s/%d", r.Password, r.Addr(), db)
}

const redisPidFile = "redis.pid"

// NewRedis starts a redis-server with extra options (as on its command
// line, e.g. "--appendfsync", "everysec"), and returns it with a stop
// function. Use it from TestMain, or StartRedis from a test.
func NewRedis(opts ...string) (*Redis, func(), error) {
	if Short() {
		return nil, nil, ErrShort
	}
	reapRedisOrphans()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, nil, errors.New("sandboxtest: redis-server is not installed (run 'make deps', or apt-get install redis-server)")
	}
	dir, err := os.MkdirTemp("", "sbr")
	if err != nil {
		return nil, nil, err
	}
	if err := markOwner(dir); err != nil {
		return nil, nil, err
	}
	var pw [12]byte
	_, _ = rand.Read(pw[:])
	r := &Redis{Password: hex.EncodeToString(pw[:]), Dir: dir}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if r.Port, err = sandbox.FreePort(); err != nil {
			return nil, nil, err
		}
		r.args = append([]string{
			"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "",
			"--requirepass", r.Password, "--daemonize", "no", "--logfile", "redis.log",
		}, opts...)
		if lastErr = r.start(bin); lastErr == nil {
			stop := func() {
				r.Kill()
				_ = os.RemoveAll(dir)
			}
			return r, stop, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, nil, fmt.Errorf("sandboxtest: start redis-server: %w", lastErr)
}

// StartRedis starts a redis-server for one test and stops it when the test
// ends. A missing redis-server fails the test: CI installs it.
func StartRedis(tb testing.TB, opts ...string) *Redis {
	tb.Helper()
	SkipShort(tb)
	r, stop, err := NewRedis(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return r
}

func (r *Redis) start(bin string) error {
	out, err := os.OpenFile(filepath.Join(r.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// The password is on the command line: a test server's, on loopback.
	cmd := exec.Command(bin, r.args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.Dir, out, out
	// It dies with the test process (and reapOrphans catches the rest).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	_ = os.WriteFile(filepath.Join(r.Dir, redisPidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	r.mu.Lock()
	r.cmd, r.out = cmd, out
	r.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
			r.mu.Lock()
			r.cmd = nil
			r.mu.Unlock()
			out.Close()
			return fmt.Errorf("redis-server exited: %s", lastLines(string(log), 5))
		default:
		}
		if r.ping() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			r.Kill()
			return errors.New("redis-server did not answer PING within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping authenticates and pings over a raw connection; an error while the
// server starts or loads its append-only file (LOADING).
func (r *Redis) ping() error {
	c, err := net.DialTimeout("tcp", r.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n", len(r.Password), r.Password); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != want {
			return errors.New(strings.TrimSpace(line))
		}
	}
	return nil
}

// Kill stops the server with SIGKILL (a crash) and waits until it is gone.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd, out := r.cmd, r.out
	r.cmd, r.out = nil, nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	for i := 0; i < 500 && processAlive(cmd.Process.Pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	out.Close()
	_ = os.Remove(filepath.Join(r.Dir, redisPidFile))
}

// Restart starts a killed server again on its port and directory: it
// loads its append-only file, as after a crash.
func (r *Redis) Restart(tb testing.TB) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.start(bin); err != nil {
		tb.Fatal(err)
	}
}

// reapRedisOrphans stops and removes the servers of test processes that
// died without cleaning up, as reapOrphans does for MariaDB.
func reapRedisOrphans() {
	for _, dir := range deadOwnerDirs("sbr*") {
		reapRedis(dir)
		_ = os.RemoveAll(dir)
	}
}

// reapRedis kills a redis-server that a dead test process left in dir.
func reapRedis(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, redisPidFile))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	// Only a redis-server: the pid may have been reused since.
	if strings.HasPrefix(procstat.Comm(pid), "redis-server") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
