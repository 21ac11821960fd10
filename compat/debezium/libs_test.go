package debezium

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Version is the Debezium release the test runs. Debezium 2.7's MySQL
// connector no longer reads MariaDB (its connector.adapter=mariadb is gone);
// the MariaDB connector is its own artifact, on Maven Central for 2.7 only as
// 2.7.0.Final, so the engine and the connector are both that release.
const Version = "2.7.0.Final"

// cacheDir is where the jars are kept: $SLUICE_DEBEZIUM_CACHE or
// ~/.cache/sluice-debezium/<version>.
func cacheDir() string {
	if d := os.Getenv("SLUICE_DEBEZIUM_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "sluice-debezium", Version)
	}
	return filepath.Join(os.TempDir(), "sluice-debezium", Version)
}

// fetchLibs returns the directory of Debezium's jars (the embedded engine,
// the MariaDB connector and their dependencies), fetching them once from
// Maven Central with mvn as sandbox.KafkaLibs does: a generated pom and
// dependency:copy-dependencies, under a file lock so that parallel test
// binaries fetch once.
func fetchLibs(ctx context.Context) (string, error) {
	cache := cacheDir()
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
		return "", fmt.Errorf("mvn not found (it fetches Debezium's jars from Maven Central): run 'make deps', or apt-get install -y maven default-jdk-headless")
	}
	pom := `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sluice</groupId><artifactId>debezium-compat-libs</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>io.debezium</groupId><artifactId>debezium-embedded</artifactId><version>` + Version + `</version></dependency>
    <dependency><groupId>io.debezium</groupId><artifactId>debezium-connector-mariadb</artifactId><version>` + Version + `</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
  </dependencies>
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
		return "", fmt.Errorf("fetch Debezium %s jars with mvn: %w: %s (check that Maven Central is reachable; a proxy goes in ~/.m2/settings.xml)", Version, err, lastLines(string(out), 3))
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(Version+"\n"), 0o644); err != nil {
		return "", err
	}
	return libs, nil
}

// compile compiles Dbz.java against libs into dir.
func compile(ctx context.Context, libs, dir string) error {
	javac, err := exec.LookPath("javac")
	if err != nil {
		return fmt.Errorf("javac not found: run 'make deps', or apt-get install -y default-jdk-headless")
	}
	src, err := filepath.Abs("Dbz.java")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, javac, "-nowarn", "-d", dir, "-cp", filepath.Join(libs, "*"), src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("javac Dbz.java: %w: %s", err, out)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
