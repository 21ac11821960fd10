package serve

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// TestDivergedOnSyntheticBinlog checks checkDiverged and the exact-GTID
// skip without a server, on newMariaBinlog (domain 0: server 1 at 1-4,
// server 2 at 5-6; the domain's last GTID is of server 2, so every start
// of server 1 reads the binlog state of the last file). go-mysql's syncer
// sets @slave_gtid_strict_mode=1, as stock replicas in strict mode do.
func TestDivergedOnSyntheticBinlog(t *testing.T) {
	f := startFuzzServer(t)
	defer f.close()
	host, port, _ := net.SplitHostPort(f.addr)
	p, _ := strconv.Atoi(port)
	for _, c := range []struct {
		start string
		want  []uint64 // the GTIDs' sequence numbers it gets
		err   string   // or the error it gets
	}{
		{"0-1-3", []uint64{4, 5, 6}, ""},
		{"0-1-4", []uint64{5, 6}, ""}, // server 1's last, not the domain's
		{"0-2-5", []uint64{6}, ""},
		{"0-3-2", nil, "GTID 0-3-2, which is not in the master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers"},
		{"0-1-5", nil, "GTID 0-1-5, which is not in the master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers"},
		{"0-2-4", nil, "The binlog on the master is missing the GTID 0-2-4 requested by the slave"},
		{"0-1-7", nil, "GTID 0-1-7, which is not in the master's binlog"},
	} {
		t.Run(c.start, func(t *testing.T) {
			s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7400, Flavor: "mariadb", Host: host, Port: uint16(p), User: fuzzUser, Password: fuzzPass, MaxReconnectAttempts: 1})
			defer s.Close()
			set, err := mysql.ParseMariadbGTIDSet(c.start)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.StartSyncGTID(set)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				ev, err := st.GetEvent(ctx)
				cancel()
				if err != nil {
					if c.err == "" && err == context.DeadlineExceeded && len(got) == len(c.want) {
						break // everything came; the dump waits for more
					}
					if c.err != "" && strings.Contains(err.Error(), c.err) && len(got) == 0 {
						return
					}
					t.Fatalf("from %s: got %v, then %v; want %v %q", c.start, got, err, c.want, c.err)
				}
				if g, ok := ev.Event.(*replication.MariadbGTIDEvent); ok {
					got = append(got, g.GTID.SequenceNumber)
				}
			}
			if c.err != "" || fmtUints(got) != fmtUints(c.want) {
				t.Fatalf("from %s: got %v, want %v %q", c.start, got, c.want, c.err)
			}
		})
	}
}

func fmtUints(a []uint64) string {
	s := make([]string, len(a))
	for i, v := range a {
		s[i] = strconv.FormatUint(v, 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}
