package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-db/sluice/sandbox"
)

// newClient is the load generator's HTTP client: enough idle connections for
// every client thread.
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1000, 1000
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (b *bench) stopCoordinators() {
	for _, p := range b.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

func (b *bench) spawn(ctx context.Context, name, url string, cmd *exec.Cmd) error {
	logf, err := os.Create(filepath.Join(os.TempDir(), "dtxbench-"+name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	b.procs = append(b.procs, cmd)
	if b.urls == nil {
		b.urls, b.pids = map[string]string{}, map[string]int{}
	}
	b.urls[name] = url
	b.pids[name] = cmd.Process.Pid
	for i := 0; i < 600; i++ {
		resp, err := b.client.Get(url + "/newGid")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not start; see %s", name, logf.Name())
}

func (b *bench) startSluice(ctx context.Context, name, store string) error {
	return b.startSluiceBin(ctx, name, store, b.o.sluice, b.o.sluiceArgs)
}

func (b *bench) startSluiceBin(ctx context.Context, name, store, bin string, extra []string) error {
	port, err := sandbox.FreePort()
	if err != nil {
		return err
	}
	args := []string{"dtx", "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--store", store, "--log-level", "warn"}
	if name != "sluice-b" { // an A/B's other build may predate --grpc-listen; no gRPC row uses it
		gport, err := sandbox.FreePort()
		if err != nil {
			return err
		}
		b.setGRPC(name, fmt.Sprintf("127.0.0.1:%d", gport))
		args = append(args, "--grpc-listen", fmt.Sprintf("127.0.0.1:%d", gport))
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	return b.spawn(ctx, name, fmt.Sprintf("http://127.0.0.1:%d/api/dtmsvr", port), cmd)
}

// startDtm starts dtm with its MySQL store ("dtm"), its default boltdb
// store ("dtm-bolt", which dtm keeps in ./dtm.bolt: it runs in its own
// directory under dir) or its Redis store ("dtm-redis", database 0, keys
// under dtm's prefix {a}; sluice's are in database 1).
func (b *bench) startDtm(ctx context.Context, name, dir string) error {
	store := fmt.Sprintf(`Store:
  Driver: 'mysql'
  Host: '127.0.0.1'
  User: 'root'
  Password: ''
  Port: %d
  Db: 'dtm'
`, b.inst.Port)
	workDir := filepath.Join(dir, name)
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	if name == "dtm-bolt" {
		store = "Store:\n  Driver: 'boltdb'\n"
	} else if name == "dtm-redis" {
		host, port, _ := strings.Cut(b.redis.Addr(), ":")
		store = fmt.Sprintf("Store:\n  Driver: 'redis'\n  Host: '%s'\n  Port: %s\n  Password: '%s'\n", host, port, b.redis.Password)
	} else {
		sqlText, err := os.ReadFile(b.o.dtmSQL)
		if err != nil {
			return fmt.Errorf("dtm schema: %w", err)
		}
		for _, st := range strings.Split(string(sqlText), ";") {
			if strings.TrimSpace(st) == "" {
				continue
			}
			if _, err := b.db.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("dtm schema: %w", err)
			}
		}
	}
	var ports [3]int
	var err error
	for i := range ports {
		if ports[i], err = sandbox.FreePort(); err != nil {
			return err
		}
	}
	conf := store + fmt.Sprintf(`HttpPort: %d
GrpcPort: %d
JsonRpcPort: %d
LogLevel: 'error'
`, ports[0], ports[1], ports[2])
	confPath := filepath.Join(workDir, "dtm.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	b.setGRPC(name, fmt.Sprintf("127.0.0.1:%d", ports[1]))
	cmd := exec.CommandContext(ctx, b.o.dtm, "-c", confPath)
	cmd.Dir = workDir
	return b.spawn(ctx, name, fmt.Sprintf("http://127.0.0.1:%d/api/dtmsvr", ports[0]), cmd)
}
