package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/verify"
)

// verifyCLI runs "sluice verify args..." in process and returns its output,
// its error and the exit code main would use.
func verifyCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard) // progress lines; the error comes back as err
	root.SetArgs(append([]string{"verify"}, args...))
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		code = exitCode(err)
	}
	return out.String(), code, err
}

// verifyTask writes a task file and returns its path.
func verifyTask(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "task.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func verifyTaskYAML(src, dst sluice.Endpoint, include string, extra string) string {
	return fmt.Sprintf(`name: vt
source: {host: %s, port: %d, user: %s, password: %q}
target: {host: %s, port: %d, user: %s, password: %q}
tables:
  include: [%q]
routes:
  - {schema: vsrc, target-schema: vdst}
threads: 2
rows-per-chunk: 50
%s`, src.Host, src.Port, src.User, src.Password, dst.Host, dst.Port, dst.User, dst.Password, include, extra)
}

// wantVerifyFailure checks a failed run: the exit code, a sentinel, and
// that the message main prints is one line.
func wantVerifyFailure(t *testing.T, err error, code, wantCode int, sentinel error, contains string) {
	t.Helper()
	if err == nil || code != wantCode || !errors.Is(err, sentinel) {
		t.Fatalf("err = %v (exit %d), want exit %d wrapping %v", err, code, wantCode, sentinel)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, contains) {
		t.Fatalf("message %q: want one line containing %q", msg, contains)
	}
	var se *sluice.Error
	if !errors.As(err, &se) || se.Hint == "" {
		t.Fatalf("%q is not a *sluice.Error with a fix", msg)
	}
}

// TestVerifyCommand runs the command against one sandbox that holds both
// the source schema (vsrc) and, through a route, the target schema (vdst).
func TestVerifyCommand(t *testing.T) {
	inst := sandboxtest.Start(t, "vcmd")
	db := sandboxtest.MustOpen(t, inst, "")
	for _, s := range []string{"vsrc", "vdst"} {
		sandboxtest.MustExec(t, db,
			"CREATE DATABASE "+s,
			"CREATE TABLE "+s+".same (id INT PRIMARY KEY, v VARCHAR(10))",
			"INSERT INTO "+s+".same SELECT seq, seq FROM "+s+".seq_1_to_120",
			"CREATE TABLE "+s+".t (id INT PRIMARY KEY, v VARCHAR(10))",
			"INSERT INTO "+s+".t SELECT seq, seq FROM "+s+".seq_1_to_300",
		)
	}
	ep := inst.Endpoint()
	equalTask := verifyTask(t, verifyTaskYAML(ep, ep, "vsrc.*", ""))

	t.Run("equal", func(t *testing.T) {
		out, code, err := verifyCLI(t, "--config", equalTask)
		if err != nil || code != 0 {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		if !strings.Contains(out, "TOTAL (2 tables)") || !strings.Contains(out, "vsrc.t") || strings.Contains(out, "differ") {
			t.Fatalf("output:\n%s", out)
		}
	})

	sandboxtest.MustExec(t, db,
		"UPDATE vdst.t SET v = 'changed' WHERE id = 42",
		"DELETE FROM vdst.t WHERE id = 200",
		"INSERT INTO vdst.t VALUES (1000, 'extra')",
	)

	t.Run("different", func(t *testing.T) {
		out, code, err := verifyCLI(t, "--config", equalTask, "--threads", "3", "--rechecks", "1", "--recheck-delay", "1ms")
		wantVerifyFailure(t, err, code, 1, sluice.ErrVerifyDifferent, "vsrc.t (1 missing, 1 extra, 1 different)")
		for _, want := range []string{"vsrc.t id=42: different\n", "vsrc.t id=200: missing\n", "vsrc.t id=1000: extra\n", "1 of 2 tables differ"} {
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("max-diffs and json", func(t *testing.T) {
		out, code, err := verifyCLI(t, "--config", equalTask, "--max-diffs", "1", "--json", "--rows-per-chunk", "7")
		if code != 1 || !errors.Is(err, sluice.ErrVerifyDifferent) {
			t.Fatalf("exit %d: %v", code, err)
		}
		var rep struct {
			Equal  bool `json:"equal"`
			Tables []struct {
				Source struct{ Schema, Name string }
				Target struct{ Schema, Name string }
				Status string
				Chunks int
				Diffs  []struct{ Kind, Key string }
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if rep.Equal || len(rep.Tables) != 2 {
			t.Fatalf("%+v", rep)
		}
		tt := rep.Tables[1]
		if tt.Target.Schema != "vdst" || tt.Status != "different" || len(tt.Diffs) != 1 || tt.Diffs[0].Key != "id=42" || tt.Chunks != 43 {
			t.Fatalf("vsrc.t: %+v", tt)
		}
	})

	t.Run("table filter", func(t *testing.T) {
		out, code, err := verifyCLI(t, "--config", equalTask, "--table", "vsrc.s*")
		if err != nil || code != 0 || strings.Contains(out, "vsrc.t ") {
			t.Fatalf("exit %d: %v\n%s", code, err, out)
		}
		_, code, err = verifyCLI(t, "--config", equalTask, "--table", "vsrc.nosuch")
		wantVerifyFailure(t, err, code, 2, sluice.ErrUnknownTable, `"vsrc.nosuch"`)
	})

	t.Run("missing target table", func(t *testing.T) {
		sandboxtest.MustExec(t, db, "CREATE TABLE vsrc.only_src (id INT PRIMARY KEY)")
		defer sandboxtest.MustExec(t, db, "DROP TABLE vsrc.only_src")
		out, code, err := verifyCLI(t, "--config", equalTask, "--table", "vsrc.only_src")
		wantVerifyFailure(t, err, code, 1, sluice.ErrVerifyDifferent, "missing on target")
		if !strings.Contains(out, "vdst.only_src does not exist on the target") {
			t.Fatalf("output:\n%s", out)
		}
	})

	t.Run("unknown table pattern", func(t *testing.T) {
		p := verifyTask(t, verifyTaskYAML(ep, ep, "nosuchdb.*", ""))
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrUnknownTable, `"nosuchdb.*"`)
	})

	t.Run("wrong password", func(t *testing.T) {
		bad := ep
		bad.Password = "wrong-secret"
		p := verifyTask(t, verifyTaskYAML(ep, bad, "vsrc.*", ""))
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrAccessDenied, "target.password")
		if strings.Contains(err.Error(), "wrong-secret") {
			t.Fatalf("password in message: %v", err)
		}
	})

	t.Run("no privilege on target", func(t *testing.T) {
		sandboxtest.MustExec(t, db, "CREATE USER 'vro'@'127.0.0.1'", "GRANT SELECT ON vsrc.* TO 'vro'@'127.0.0.1'")
		ro := ep
		ro.User = "vro"
		p := verifyTask(t, verifyTaskYAML(ep, ro, "vsrc.*", ""))
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrPrivilege, "grant the missing privilege to vro on target")
	})

	t.Run("bad flags", func(t *testing.T) {
		_, code, err := verifyCLI(t, "--config", equalTask, "--threads", "1000")
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "threads")
		_, code, err = verifyCLI(t, "--config", equalTask, "--rechecks", "-1")
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "rechecks")
	})
}

// TestVerifyCommandBadInput covers failures that need no server.
func TestVerifyCommandBadInput(t *testing.T) {
	t.Run("malformed yaml", func(t *testing.T) {
		p := verifyTask(t, "source: {host: [127.0.0.1\ntables: include\n")
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "parse task file")
	})
	t.Run("unknown key", func(t *testing.T) {
		p := verifyTask(t, verifyTaskYAML(sluice.Endpoint{Host: "127.0.0.1", Port: 1, User: "root"}, sluice.Endpoint{Host: "127.0.0.1", Port: 1, User: "root"}, "a.*", "treads: 4\n"))
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "treads")
	})
	t.Run("no config", func(t *testing.T) {
		_, code, err := verifyCLI(t)
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "--config")
	})
	t.Run("missing file", func(t *testing.T) {
		_, code, err := verifyCLI(t, "--config", filepath.Join(t.TempDir(), "nope.yaml"))
		wantVerifyFailure(t, err, code, 2, sluice.ErrConfig, "read task file")
	})
	t.Run("unreachable host", func(t *testing.T) {
		port, err := sandbox.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ep := sluice.Endpoint{Host: "127.0.0.1", Port: port, User: "root", Password: "s3cret"}
		p := verifyTask(t, verifyTaskYAML(ep, ep, "a.*", ""))
		_, code, err := verifyCLI(t, "--config", p)
		wantVerifyFailure(t, err, code, 2, sluice.ErrUnreachable, fmt.Sprintf("source 127.0.0.1:%d", port))
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("password in message: %v", err)
		}
	})
}

// verifyLines signals each write, so a test can wait for the first
// progress line without a timeout.
type verifyLines struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (w *verifyLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func TestVerifyProgressLine(t *testing.T) {
	p := &verify.Progress{}
	p.TablesPlanned.Store(2)
	p.ChunksPlanned.Store(8)
	p.Chunks.Store(2)
	p.Rows.Store(12345)
	p.DiffChunks.Store(1)
	w := &verifyLines{wrote: make(chan struct{}, 1)}
	stop := verifyProgress(w, time.Millisecond, p, 2)
	<-w.wrote
	stop()
	out := w.b.String() // the printer has stopped: no more writes
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasSuffix(first, ": 2/2 tables planned, 2/8 chunks (25%), 12345 rows, 1 chunks differ") {
		t.Fatalf("progress line %q", first)
	}
	verifyProgress(w, 0, p, 2)() // disabled: returns at once, prints nothing
	if w.b.String() != out {
		t.Fatalf("disabled progress printed %q", strings.TrimPrefix(w.b.String(), out))
	}
}
