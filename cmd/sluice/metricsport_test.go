package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestMetricsPortSameInCopyAndReplication: with the default metrics-addr
// (127.0.0.1:0) the copy served its metrics on one port and replication
// on another, so a scrape target set during the copy went dark when the
// copy ended. Replication now takes the port the copy chose.
func TestMetricsPortSameInCopyAndReplication(t *testing.T) {
	inst := sandboxtest.Start(t, "mport")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE vsrc", "CREATE TABLE vsrc.t (id INT PRIMARY KEY)", "INSERT INTO vsrc.t SELECT seq FROM vsrc.seq_1_to_200")
	ep := inst.Endpoint()
	dir := t.TempDir()
	cfg := verifyTask(t, strings.Replace(verifyTaskYAML(ep, ep, "vsrc.*", "dir: "+dir+"\n"), "name: vt", "name: mport", 1))
	var copyAddr string
	afterPrepare = func() {
		defer func() { afterPrepare = nil }()
		for copyAddr == "" {
			if s, err := replicate.ReadStatus(dir); err == nil && s.Stage == replicate.StageCopying && s.MetricsAddr != "" {
				copyAddr = s.MetricsAddr
			}
		}
	}
	defer func() { afterPrepare = nil }()
	r := startMigrateAll(cfg)
	defer r.stop()
	if !r.waitOutput("replicate mport: source") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	m := regexp.MustCompile(`metrics on (\S+)`).FindStringSubmatch(r.out.String())
	if m == nil || copyAddr == "" || m[1] != copyAddr {
		t.Fatalf("the copy served metrics on %q, replication on %v\n%s", copyAddr, m, r.out.String())
	}
}
