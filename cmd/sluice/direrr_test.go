package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDirAndTLSRefusalsHaveAFix: a dir: that is a file, a task dir that
// cannot be written and a server that refuses the TLS the task asks for
// each stopped with a bare system or driver message ("mkdir ...: not a
// directory", "TLS requested but server does not support TLS"). Each is
// now one line that names the setting and the fix.
func TestDirAndTLSRefusalsHaveAFix(t *testing.T) {
	inst := sandboxtest.Start(t, "dirtls")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE vsrc", "CREATE TABLE vsrc.t (id INT PRIMARY KEY)", "INSERT INTO vsrc.t VALUES (1)")
	ep := inst.Endpoint()
	base := t.TempDir()
	file := filepath.Join(base, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A read-only dir: root (as tests often run) writes through mode
	// bits, so the dir is made immutable when chattr can; else 0500.
	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", ro).CombinedOutput(); err != nil {
			t.Logf("chattr +i: %v %s: the read-only case is skipped", err, out)
			ro = ""
		} else {
			defer exec.Command("chattr", "-i", ro).Run() //nolint:errcheck
		}
	}
	cases := []struct {
		name, dir, tls string
		want, fix      string
	}{
		{"dir is a file", file, "", "dir: names a file", "set dir: in the task file to a directory path"},
		{"dir is a file (under it)", filepath.Join(file, "sub"), "", "dir: names a file", "set dir: in the task file to a directory path"},
		{"read-only dir", ro, "", "the task's dir is not writable", "make it writable"},
		{"TLS refused", filepath.Join(base, "tls"), "required", "target.tls.mode is required, but the server offers no TLS", "enable TLS on the target server"},
	}
	for _, c := range cases {
		if c.dir == "" {
			continue
		}
		y := verifyTaskYAML(ep, ep, "vsrc.*", "dir: "+c.dir+"\n")
		if c.tls != "" {
			y = strings.Replace(y, "target: {", "target: {tls: {mode: "+c.tls+"}, ", 1)
		}
		for _, mode := range []string{"full", "incremental"} {
			_, _, err := runCLI(t, "migrate", "--config", verifyTask(t, y), "--mode", mode)
			var se *sluice.Error
			if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || !strings.Contains(se.Hint, c.fix) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s (--mode %s): got %v, want one line with %q and the fix %q", c.name, mode, err, c.want, c.fix)
			}
		}
	}
}
