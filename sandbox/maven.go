package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-db/sluice"
)

// MavenArtifact is a Maven Central artifact: group, artifact and version.
type MavenArtifact struct{ Group, Artifact, Version string }

// MavenLibs returns the directory of the jars of arts and their
// dependencies under cache (cache/libs), fetching them once from Maven
// Central with mvn: a generated pom and dependency:copy-dependencies.
// Concurrent callers (parallel test binaries) wait for one fetch under a
// file lock; what names the jars in messages.
func MavenLibs(ctx context.Context, cache, what string, arts []MavenArtifact) (string, error) {
	libs := filepath.Join(cache, "libs")
	done := filepath.Join(cache, "libs.done")
	if _, err := os.Stat(done); err == nil {
		return libs, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "fetch.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(done); err == nil {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", &sluice.Error{Op: "fetch " + what, Err: fmt.Errorf("%w: mvn not found (it fetches the jars from Maven Central)", sluice.ErrConfig),
			Hint: "run 'make deps', or apt-get install -y maven default-jdk-headless"}
	}
	var deps strings.Builder
	for _, a := range arts {
		fmt.Fprintf(&deps, "    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n", a.Group, a.Artifact, a.Version)
	}
	pom := `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sluice</groupId><artifactId>sandbox-libs</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
` + deps.String() + `  </dependencies>
</project>
`
	if err := os.WriteFile(filepath.Join(cache, "pom.xml"), []byte(pom), 0o644); err != nil {
		return "", err
	}
	tmp := libs + ".tmp"
	_ = os.RemoveAll(tmp)
	_ = os.RemoveAll(libs)
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory="+tmp)
	cmd.Dir = cache
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &sluice.Error{Op: "fetch " + what + " jars with mvn", Err: fmt.Errorf("%w: %s", err, lastLines(string(out), 3)),
			Hint: "check that Maven Central is reachable (a proxy goes in ~/.m2/settings.xml)"}
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(what+"\n"), 0o644); err != nil {
		return "", err
	}
	return libs, nil
}
