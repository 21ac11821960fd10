package serve_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/serve"
)

// TestServeCountsWhatItSends: while go-mysql's BinlogSyncer (which
// registers as a replica) reads through the service, SHOW SLAVE HOSTS,
// Stats and the Prometheus metrics report its position, the events and
// bytes it received (counted by the client), the transactions (counted
// by the source's GTID sequence), a lag of 0 once it has everything, and
// DT percentiles.
func TestServeCountsWhatItSends(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	seq := func() int {
		var pos string
		if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(pos[strings.LastIndexByte(pos, '-')+1:])
		return n
	}
	before := seq()
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, v varchar(20))")
	for i := 0; i < 20; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO d.t VALUES (%d, 'r')", i))
	}
	sandboxtest.MustExec(t, db, "FLUSH BINARY LOGS", "UPDATE d.t SET v='u'")
	txns := seq() - before
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	srv, err := serve.New(serve.Config{ServerID: 999, Users: []serve.User{{Name: "repl", Password: "pw"}}}, replicate.ServeLog(l), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer func() { ln.Close(); srv.Close() }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7003, Flavor: "mariadb", Host: "127.0.0.1", Port: uint16(p), User: "repl", Password: "pw"})
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		t.Fatal(err)
	}
	// The service sends everything the relay holds (the source wrote
	// nothing more after end, but MariaDB may add a Binlog_checkpoint).
	var stats []serve.DumpStats
	sandboxtest.Eventually(t, 30*time.Second, "one dump at the relay's end", func() bool {
		stats = srv.Stats()
		all := l.End()
		return len(stats) == 1 && stats[0].File == all.File && stats[0].Pos == all.Pos && all.Compare(end) >= 0
	}, func() string { return fmt.Sprintf("stats %+v, relay end %s", stats, l.End()) })
	// The client's own count of the relay's events (not the artificial
	// Rotate nor the FDE the service resends at a mid-file start), up to
	// there.
	var events, bytes uint64
	file := start.File
	for {
		p := lastPos(t, st, &events, &bytes, &file)
		if file == stats[0].File && p >= stats[0].Pos {
			break
		}
	}
	d := stats[0]
	if d.ServerID != 7003 || d.Events != events || d.Bytes != bytes || d.Txns != uint64(txns) || d.LagSeconds != 0 || d.DelayP99Ms < d.DelayP50Ms || d.DelayP50Ms <= 0 {
		t.Fatalf("stats %+v; the client got %d events, %d bytes; the source wrote %d transactions", d, events, bytes, txns)
	}
	sdb, err := sql.Open("mysql", "repl:pw@tcp("+ln.Addr().String()+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var sid, host, rport, master, bfile, bpos, lag, evs, byts, tx, p50, p99 sql.NullString
	if err := sdb.QueryRow("SHOW SLAVE HOSTS").Scan(&sid, &host, &rport, &master, &bfile, &bpos, &lag, &evs, &byts, &tx, &p50, &p99); err != nil {
		t.Fatal(err)
	}
	if sid.String != "7003" || bfile.String != end.File || bpos.String != strconv.FormatUint(uint64(d.Pos), 10) || tx.String != strconv.Itoa(txns) || evs.String != strconv.FormatUint(events, 10) {
		t.Fatalf("SHOW SLAVE HOSTS: server_id %s, %s:%s, %s transactions, %s events; want 7003, %s:%d, %d, %d", sid.String, bfile.String, bpos.String, tx.String, evs.String, end.File, d.Pos, txns, events)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(srv.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] = value(m)
		}
	}
	for name, want := range map[string]float64{
		"sluice_serve_replicas": 1, "sluice_serve_replica_transactions_sent_total": float64(txns),
		"sluice_serve_replica_events_sent_total": float64(events), "sluice_serve_replica_bytes_sent_total": float64(bytes),
		"sluice_serve_transactions_sent_total": float64(txns), "sluice_serve_delay_seconds": float64(txns),
		"sluice_serve_replica_lag_seconds": 0, "sluice_serve_replica_binlog_offset": float64(d.Pos),
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// lastPos reads one event, counts it unless the service made it up (the
// artificial Rotate, the FDE resent at a mid-file start), and returns its
// log_pos.
func lastPos(t *testing.T, st *replication.BinlogStreamer, events, bytes *uint64, file *string) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev, err := st.GetEvent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := ev.Header
	if re, ok := ev.Event.(*replication.RotateEvent); ok && h.Timestamp == 0 {
		*file = string(re.NextLogName)
		return 0
	}
	if h.EventType == replication.FORMAT_DESCRIPTION_EVENT && h.LogPos == 0 {
		return 0
	}
	*events++
	*bytes += uint64(h.EventSize)
	return h.LogPos
}

// value is a metric's value: a counter's, a gauge's, or a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
