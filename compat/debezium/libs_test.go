package debezium

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sluice-db/sluice/sandbox"
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
// the MariaDB connector and their dependencies), fetched once from Maven
// Central as the Kafka sandbox's are.
func fetchLibs(ctx context.Context) (string, error) {
	return sandbox.MavenLibs(ctx, cacheDir(), "Debezium "+Version, []sandbox.MavenArtifact{
		{Group: "io.debezium", Artifact: "debezium-embedded", Version: Version},
		{Group: "io.debezium", Artifact: "debezium-connector-mariadb", Version: Version},
		{Group: "org.slf4j", Artifact: "slf4j-simple", Version: "1.7.36"}})
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
