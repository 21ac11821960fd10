package sandboxtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-db/sluice/sandbox"
)

const ownerFile = "owner.pid"

// markOwner records which test process owns a sandbox directory.
func markOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// reapOrphans stops and removes sandboxes left by test processes that died
// without cleaning up (a killed `go test`, a panic in TestMain). Their
// servers would otherwise run forever, holding memory, ports and any file
// descriptors they inherited.
func reapOrphans() {
	for _, dir := range deadOwnerDirs("sbx*") {
		insts, _ := sandbox.List(dir)
		for _, inst := range insts {
			_ = inst.Kill()
		}
		_ = os.RemoveAll(dir)
	}
}

// deadOwnerDirs lists the temporary directories matching pattern whose
// owning test process (markOwner) is gone.
func deadOwnerDirs(pattern string) []string {
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), pattern, ownerFile))
	var dirs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		dirs = append(dirs, filepath.Dir(f))
	}
	return dirs
}

func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
