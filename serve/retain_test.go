package serve_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// TestRetentionKeepsWhatReplicasRead: past incremental.relay-retain, relay
// files are purged, except the one a connected replica is reading (and
// every later one); once it disconnects, that one goes too. The slow
// reader holds no other client back.
func TestRetentionKeepsWhatReplicasRead(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "SET GLOBAL max_allowed_packet = 64*1024*1024")
	// The client connects before the first file fills and is closed, so it
	// reads that file from before the file could be purged.
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, b longblob)")
	start := masterStatus(t, db)
	dir := t.TempDir()
	const pw = "ret-pw"
	t.Setenv("RETAIN_TEST_PW", pw)
	cfg, err := task.Parse([]byte(fmt.Sprintf(`name: ret
source: {host: 127.0.0.1, port: %d, user: root}
incremental: {binlog-file: %s, binlog-pos: %d, relay-retain: 1ms}
dir: %s
serve: {listen: "127.0.0.1:0", server-id: 4444, purge-interval: 100ms, users: [{user: repl, password: "${RETAIN_TEST_PW}"}]}
`, inst.Port, start.File, start.Pos, dir)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrc := make(chan string, 1)
	go func() { done <- replicate.RunServe(ctx, cfg, nil, func(a string) { addrc <- a }) }()
	defer func() { cancel(); <-done }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("sluice serve: %v", err)
	}
	relayFile := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, "relay", name))
		return err == nil
	}
	relayAt := func(p sluice.Position) bool {
		fi, err := os.Stat(filepath.Join(dir, "relay", p.File))
		return err == nil && fi.Size() >= int64(p.Pos)
	}
	sandboxtest.Eventually(t, time.Minute, fmt.Sprintf("the relay at %s", start), func() bool { return relayAt(start) })
	// A client reads the first file through a proxy that passes 50 KB/s.
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, "slow", "127.0.0.1:0", addr)
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Stop()
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"slow","type":"bandwidth","stream":"downstream","attributes":{"rate":50}}`)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(proxy.Listen)
	p, _ := strconv.Atoi(port)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7002, Flavor: "mariadb", Host: host, Port: uint16(p), User: "repl", Password: pw})
	st, err := s.StartSync(mysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetEvent(ctx); err != nil {
		t.Fatal(err)
	}
	// The first file gets 12 MB, more than the socket buffers: a client
	// that reads 50 KB/s stays in it.
	big := sandboxtest.MustOpen(t, inst, "") // after SET GLOBAL max_allowed_packet
	sandboxtest.MustExec(t, big,
		"INSERT INTO d.t VALUES (1, REPEAT('a', 6*1024*1024))",
		"INSERT INTO d.t VALUES (2, REPEAT('b', 6*1024*1024))",
		"FLUSH BINARY LOGS",
		"INSERT INTO d.t VALUES (3, 'c')",
		"FLUSH BINARY LOGS",
		"INSERT INTO d.t VALUES (4, 'd')",
	)
	end := masterStatus(t, db)
	sandboxtest.Eventually(t, time.Minute, "the relay has "+end.File, func() bool { return relayFile(end.File) })
	// The slow reader holds no other back: mariadb-binlog reads the whole
	// binlog through the service meanwhile. Then, many purge rounds later,
	// the file the slow one reads is still there.
	out, err := remoteBinlog(t, addr, "repl", pw, start.File, start.Pos)
	if err != nil || !strings.Contains(out, "@2='d'") {
		t.Fatalf("a second client beside the slow one: %v\n%s", err, tail(out))
	}
	time.Sleep(time.Second)
	if !relayFile(start.File) {
		s.Close()
		t.Fatalf("%s was purged while a client read it", start.File)
	}
	s.Close()
	sandboxtest.Eventually(t, 30*time.Second, start.File+" purged after its reader left", func() bool { return !relayFile(start.File) })
	if !relayFile(end.File) {
		t.Fatalf("the newest file %s was purged", end.File)
	}
}
