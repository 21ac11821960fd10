package load_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// wantOneLineError runs sluice and checks the failure contract: exit code
// 2 and exactly one line on stderr that names the problem and the fix.
func wantOneLineError(t *testing.T, want string, args ...string) string {
	t.Helper()
	out, stderr, code := sluice(t, args...)
	if code != 2 {
		t.Fatalf("exit code %d, want 2\nstdout: %s\nstderr: %s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 {
		t.Fatalf("stderr has %d lines, want one:\n%s", len(lines), stderr)
	}
	line := lines[0]
	if !strings.HasPrefix(line, "sluice: ") || !strings.Contains(line, "(fix: ") {
		t.Errorf("error line lacks the 'sluice: ... (fix: ...)' form: %s", line)
	}
	if !strings.Contains(strings.ToLower(line), strings.ToLower(want)) {
		t.Errorf("error line lacks %q: %s", want, line)
	}
	if strings.Contains(line, "s3cret") {
		t.Errorf("the password leaked into the error: %s", line)
	}
	return line
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "task.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// endpointTask is a task file with explicit source and target endpoints.
func endpointTask(t *testing.T, name, include, src, dst string) string {
	return writeFile(t, fmt.Sprintf("name: %s\nsource: %s\ntarget: %s\ntables: {include: [%q]}\n", name, src, dst, include))
}

func ep(port int, user, password string) string {
	return fmt.Sprintf("{host: 127.0.0.1, port: %d, user: %s, password: %q}", port, user, password)
}

func noCheckpoints(t *testing.T, task string) {
	t.Helper()
	dst := sandboxtest.MustOpen(t, dstInst, "")
	var n int64
	err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.load_checkpoint WHERE task = ?", task).Scan(&n)
	if err == nil && n != 0 {
		t.Errorf("%d chunks marked done for task %s after a failed run", n, task)
	}
}

func TestBadInput(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS bad_in", "CREATE DATABASE bad_in",
		"CREATE TABLE bad_in.t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO bad_in.t VALUES (1, 'a'), (2, 'b')",
		"CREATE USER IF NOT EXISTS 'sel_only'@'127.0.0.1' IDENTIFIED BY 'sel'", "GRANT SELECT ON *.* TO 'sel_only'@'127.0.0.1'")
	sandboxtest.MustExec(t, dst, "CREATE USER IF NOT EXISTS 'sel_only'@'127.0.0.1' IDENTIFIED BY 'sel'", "GRANT SELECT ON *.* TO 'sel_only'@'127.0.0.1'")
	root := func(i *sandbox.Instance) string { return ep(i.Port, "root", "") }

	t.Run("unreachable", func(t *testing.T) {
		port, err := sandbox.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		cfg := endpointTask(t, "bad_unreach", "bad_in.*", ep(port, "root", ""), root(dstInst))
		wantOneLineError(t, "unreachable", "migrate", "--config", cfg, "--mode", "full")
		noCheckpoints(t, "bad_unreach")
	})
	t.Run("wrong password", func(t *testing.T) {
		cfg := endpointTask(t, "bad_pw", "bad_in.*", ep(srcInst.Port, "sel_only", "s3cret"), root(dstInst))
		wantOneLineError(t, "access denied", "migrate", "--config", cfg, "--mode", "full")
		noCheckpoints(t, "bad_pw")
	})
	t.Run("missing source privilege", func(t *testing.T) {
		cfg := endpointTask(t, "bad_srcpriv", "bad_in.*", ep(srcInst.Port, "sel_only", "sel"), root(dstInst))
		line := wantOneLineError(t, "missing privilege", "migrate", "--config", cfg, "--mode", "full")
		if !strings.Contains(line, "RELOAD") {
			t.Errorf("the fix does not name RELOAD: %s", line)
		}
		noCheckpoints(t, "bad_srcpriv")
	})
	t.Run("missing target privilege", func(t *testing.T) {
		cfg := endpointTask(t, "bad_dstpriv", "bad_in.*", root(srcInst), ep(dstInst.Port, "sel_only", "sel"))
		line := wantOneLineError(t, "missing privilege", "migrate", "--config", cfg, "--mode", "full")
		if !strings.Contains(line, "GRANT") {
			t.Errorf("the fix does not say what to grant: %s", line)
		}
	})
	t.Run("unknown table", func(t *testing.T) {
		cfg := endpointTask(t, "bad_table", "bad_in.nosuch", root(srcInst), root(dstInst))
		wantOneLineError(t, "unknown table", "migrate", "--config", cfg, "--mode", "full")
		noCheckpoints(t, "bad_table")
	})
	t.Run("malformed yaml", func(t *testing.T) {
		cfg := writeFile(t, "name: x\nsource: {host: [\n")
		wantOneLineError(t, "parse task file", "migrate", "--config", cfg, "--mode", "full")
	})
	t.Run("unknown key", func(t *testing.T) {
		cfg := writeFile(t, fmt.Sprintf("name: x\nsource: %s\ntarget: %s\ntables: {include: [\"bad_in.*\"]}\nthreadz: 4\n", root(srcInst), root(dstInst)))
		wantOneLineError(t, "threadz", "migrate", "--config", cfg, "--mode", "full")
	})
	t.Run("different target definition", func(t *testing.T) {
		sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS bad_def", "CREATE DATABASE bad_def", "CREATE TABLE bad_def.t (id INT PRIMARY KEY, v VARCHAR(20))")
		cfg := writeFile(t, fmt.Sprintf("name: bad_def\nsource: %s\ntarget: %s\ntables: {include: [\"bad_in.*\"]}\nroutes: [{schema: bad_in, target-schema: bad_def}]\n", root(srcInst), root(dstInst)))
		wantOneLineError(t, "differs", "migrate", "--config", cfg, "--mode", "full")
		noCheckpoints(t, "bad_def")
		var n int
		if err := dst.QueryRow("SELECT COUNT(*) FROM bad_def.t").Scan(&n); err != nil || n != 0 {
			t.Errorf("the mismatching target table got %d rows (err %v)", n, err)
		}
	})
	t.Run("full disk", func(t *testing.T) { testFullDisk(t, src) })
}

// testFullDisk dumps more than fits into a 2 MB tmpfs: the dump must fail
// with a disk-full error, leave no temporary files, write no metadata (so
// load refuses the directory), and every chunk file it did keep must be
// complete.
func testFullDisk(t *testing.T, src *sql.DB) {
	const rowsPerChunk = 1000
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS bad_disk", "CREATE DATABASE bad_disk",
		"CREATE TABLE bad_disk.t (id INT PRIMARY KEY, v VARCHAR(200))",
		// 40 chunks of exactly 1000 rows, about 8 MB of text.
		"INSERT INTO bad_disk.t SELECT seq, REPEAT(CHAR(65 + seq % 26), 190) FROM bad_disk.seq_1_to_40000")
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (need root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	cfg := endpointTask(t, "bad_disk", "bad_disk.*", ep(srcInst.Port, "root", ""), ep(dstInst.Port, "root", ""))
	dir := filepath.Join(mnt, "dump")
	wantOneLineError(t, "disk full", "dump", "--config", cfg, "--dir", dir, "--threads", "2", "--rows-per-chunk", fmt.Sprint(rowsPerChunk))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dumpfmt.MetadataFile:
			t.Errorf("metadata.json was written by a failed dump")
		case strings.Contains(name, ".tmp"):
			t.Errorf("temporary file %s left behind", name)
		case strings.HasSuffix(name, ".tsv"):
			chunks++
			n, err := readAllRows(filepath.Join(dir, name), 2)
			if err != nil || n != rowsPerChunk {
				t.Errorf("chunk file %s kept with %d rows (err %v), want all %d", name, n, err, rowsPerChunk)
			}
		}
	}
	if chunks >= 40 {
		t.Fatalf("all %d chunks fit: the disk was never full", chunks)
	}
	wantOneLineError(t, "did not finish", "load", "--config", cfg, "--dir", dir)
	noCheckpoints(t, "bad_disk")
}

func readAllRows(path string, cols int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd := dumpfmt.NewReader(f, cols)
	n := 0
	for {
		_, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
