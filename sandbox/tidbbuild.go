package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-db/sluice"
)

// TiDBVersion is the one pseudo-version of github.com/pingcap/tidb the TiDB
// sandbox builds: the module proxy refuses a plain `go get` of pingcap/tidb,
// and this one builds (it reports 8.0.11-TiDB-v8.4.0).
const TiDBVersion = "v1.1.0-beta.0.20251126154744-e4e814fdc0af"

// tidbParserVersion is the parser module of the same commit: Go's module zip
// of pingcap/tidb leaves out ./pkg/parser, which its go.mod replaces to.
const tidbParserVersion = "v0.0.0-20251126154744-e4e814fdc0af"

// TiDBBuildEnv, set to 0, forbids building tidb-server: TiDBBinary then
// fails when the binary is not cached (tests skip on that).
const TiDBBuildEnv = "SLUICE_TIDB_BUILD"

// TiDBCacheDir is where tidb-server is built and kept: $SLUICE_TIDB_CACHE or
// ~/.cache/sluice-tidb/<version>, outside any repository (the binary is
// 244 MB), like the Kafka and Debezium jars.
func TiDBCacheDir() string {
	if d := os.Getenv("SLUICE_TIDB_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice-tidb", TiDBVersion)
	}
	return filepath.Join(os.TempDir(), "sluice-tidb", TiDBVersion)
}

// ErrTiDBNotBuilt is returned by TiDBBinary when the binary is not cached
// and building is forbidden.
var ErrTiDBNotBuilt = errors.New("tidb-server is not built")

// TiDBBinary returns the cached tidb-server, building it first when it is
// missing (about 11 minutes and 2.4 GB of memory on two cores). progress
// receives a line when the build starts and one every 30 s. Builds of one
// cache are serialised by a lock file, so parallel test packages build once.
func TiDBBinary(ctx context.Context, cache string, progress io.Writer) (string, error) {
	bin := filepath.Join(cache, "tidb-server")
	if isFile(bin) {
		return bin, nil
	}
	op := "sandbox tidb build"
	if os.Getenv(TiDBBuildEnv) == "0" {
		return "", &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s is missing and %s=0", ErrTiDBNotBuilt, bin, TiDBBuildEnv),
			Hint: "unset " + TiDBBuildEnv + " to build it once (about 11 minutes)"}
	}
	if progress == nil {
		progress = io.Discard
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := flockCtx(ctx, lock, progress); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	// Another process may have built it while this one waited.
	if isFile(bin) {
		return bin, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", &sluice.Error{Op: op, Err: fmt.Errorf("%w: the go command is not on PATH", sluice.ErrConfig),
			Hint: "install Go 1.23 or newer (tidb-server is built from the Go module proxy)"}
	}
	start := time.Now()
	fmt.Fprintf(progress, "building tidb-server %s into %s (once; about 11 minutes and 2.4 GB of memory)\n", TiDBVersion, cache)
	src, err := tidbSource(ctx, gobin, cache)
	if err != nil {
		return "", &sluice.Error{Op: op, Err: err, Hint: "check network access to the Go module proxy (GOPROXY)"}
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, gobin, "build", "-v", "-o", tmp, "./cmd/tidb-server")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=1")
	if err := runWithProgress(ctx, cmd, progress, start); err != nil {
		return "", &sluice.Error{Op: op, Err: err, Hint: "see the output above; rerun to retry (the module cache keeps what was downloaded)"}
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	_ = os.RemoveAll(src)
	fmt.Fprintf(progress, "built %s in %s\n", bin, time.Since(start).Round(time.Second))
	return bin, nil
}

// tidbSource downloads the pinned module and copies it to a writable
// directory under cache, with the parser replace pointed at the module proxy.
func tidbSource(ctx context.Context, gobin, cache string) (string, error) {
	dl := exec.CommandContext(ctx, gobin, "mod", "download", "-json", "github.com/pingcap/tidb@"+TiDBVersion)
	dl.Dir = cache // outside any module: go mod download of module@version needs none
	dl.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := dl.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download github.com/pingcap/tidb@%s: %v %s %s", TiDBVersion, err, m.Error, stderrOf(err))
	}
	src := filepath.Join(cache, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-r", m.Dir, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", m.Dir, err, out)
	}
	if out, err := exec.CommandContext(ctx, "chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chmod %s: %v: %s", src, err, out)
	}
	ed := exec.CommandContext(ctx, gobin, "mod", "edit", "-replace",
		"github.com/pingcap/tidb/pkg/parser=github.com/pingcap/tidb/pkg/parser@"+tidbParserVersion)
	ed.Dir = src
	if out, err := ed.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod edit: %v: %s", err, out)
	}
	return src, nil
}

// runWithProgress runs a `go build -v`, counting the packages it names, and
// prints the count and the elapsed time every 30 s so a user sees it move.
func runWithProgress(ctx context.Context, cmd *exec.Cmd, progress io.Writer, start time.Time) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var pkgs atomic.Int64
	var tail strings.Builder
	scanned := make(chan struct{})
	go func() { // owned here: ends when pw is closed below
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") || strings.Contains(line, " ") {
				if tail.Len() < 8192 {
					tail.WriteString(line + "\n")
				}
				continue
			}
			pkgs.Add(1)
		}
	}()
	if err := cmd.Start(); err != nil {
		pw.Close()
		<-scanned
		return err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait(); pw.Close() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-waited:
			<-scanned
			if err != nil {
				return fmt.Errorf("go build ./cmd/tidb-server: %v\n%s", err, tail.String())
			}
			return nil
		case <-tick.C:
			fmt.Fprintf(progress, "  building tidb-server: %d packages compiled, %s\n", pkgs.Load(), time.Since(start).Round(time.Second))
		case <-ctx.Done():
			// CommandContext kills go build; wait for it to be reaped.
			<-waited
			<-scanned
			return ctx.Err()
		}
	}
}

// flockCtx takes an exclusive lock on f, telling the user when another
// build holds it.
func flockCtx(ctx context.Context, f *os.File, progress io.Writer) error {
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if !told {
			fmt.Fprintf(progress, "another process is building tidb-server (%s); waiting for it\n", f.Name())
			told = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
