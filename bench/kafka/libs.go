package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sluice-db/sluice/sandbox"
)

// Kafka Connect and Debezium versions the peer runs. Debezium 2.7's MySQL
// connector no longer reads MariaDB; the MariaDB connector is its own
// artifact, on Maven Central for 2.7 only as 2.7.0.Final (as in
// compat/debezium). Connect is the broker's release (the Kafka sandbox's).
const (
	connectVersion  = "3.9.1"
	debeziumVersion = "2.7.0.Final"
)

// connectCache is where the Connect and Debezium jars are kept:
// $SLUICE_CONNECT_CACHE or ~/.cache/sluice-connect/<connect>-<debezium>.
func connectCache() string {
	if d := os.Getenv("SLUICE_CONNECT_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sluice-connect", connectVersion+"-"+debeziumVersion)
}

// connectLibs fetches (once) Kafka Connect's runtime, its JSON converter and
// the Debezium MariaDB connector with their dependencies, from Maven Central.
func connectLibs(ctx context.Context) (string, error) {
	return sandbox.MavenLibs(ctx, connectCache(), "Kafka Connect "+connectVersion+" + Debezium "+debeziumVersion, []sandbox.MavenArtifact{
		{Group: "org.apache.kafka", Artifact: "connect-runtime", Version: connectVersion},
		{Group: "org.apache.kafka", Artifact: "connect-json", Version: connectVersion},
		{Group: "io.debezium", Artifact: "debezium-connector-mariadb", Version: debeziumVersion},
		{Group: "org.slf4j", Artifact: "slf4j-simple", Version: "1.7.36"},
	})
}
