package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// TestMySQLAutoPositionDump: COM_BINLOG_DUMP_GTID as go-mysql's
// BinlogSyncer sends it (MySQL flavor, the bytes of a real client). No
// MySQL server is packaged on these machines, so the served binlog is a
// synthetic MySQL 8.0 binlog in memory (memBinlog): two files, Previous_gtids
// A:1-10 and A:1-12, transactions A:11 to A:14. The dump starts in the
// newest file whose Previous_gtids the replica has, skips the transactions
// it has, and a replica that lacks purged ones gets ERR 1236.
func TestMySQLAutoPositionDump(t *testing.T) {
	const sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	mb := newMySQLBinlog(t, sid)
	srv, err := New(Config{ServerID: 999, Users: []User{{Name: "repl", Password: "pw"}}}, mb, nil)
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
	for _, c := range []struct {
		have, file string
		want       []int64
	}{
		{sid + ":1-10", "binlog.000001", []int64{11, 12, 13, 14}},
		{sid + ":1-11", "binlog.000001", []int64{12, 13, 14}},
		{sid + ":1-12", "binlog.000002", []int64{13, 14}},
		{sid + ":1-13", "binlog.000002", []int64{14}},
	} {
		t.Run(c.have, func(t *testing.T) {
			s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7200, Flavor: "mysql", Host: "127.0.0.1", Port: uint16(p), User: "repl", Password: "pw"})
			defer s.Close()
			set, err := mysql.ParseMysqlGTIDSet(c.have)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.StartSyncGTID(set)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for len(got) < len(c.want) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ev, err := st.GetEvent(ctx)
				cancel()
				if err != nil {
					t.Fatalf("after %v: %v", got, err)
				}
				switch e := ev.Event.(type) {
				case *replication.RotateEvent:
					if ev.Header.Timestamp == 0 && len(got) == 0 && string(e.NextLogName) != c.file {
						t.Fatalf("the dump starts in %q, want %s", e.NextLogName, c.file)
					}
				case *replication.GTIDEvent:
					u := e.SID
					if fmt.Sprintf("%x", u) != strings.ReplaceAll(sid, "-", "") {
						t.Fatalf("GTID of source %x", u)
					}
					got = append(got, e.GNO)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("transactions %v, want %v", got, c.want)
			}
		})
	}
	// A replica that lacks A:6-10, which the served binlog no longer has.
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7201, Flavor: "mysql", Host: "127.0.0.1", Port: uint16(p), User: "repl", Password: "pw"})
	defer s.Close()
	set, _ := mysql.ParseMysqlGTIDSet(sid + ":1-5")
	st, err := s.StartSyncGTID(set)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := st.GetEvent(ctx)
		cancel()
		if err == nil {
			continue
		}
		var me *mysql.MyError
		if !errors.As(err, &me) || me.Code != mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG || !strings.Contains(me.Message, "purged") || !strings.Contains(me.Message, "fix:") {
			t.Fatalf("a replica lacking purged GTIDs: %v", err)
		}
		break
	}
}

// memBinlog is a synthetic binlog in memory (see TestMySQLAutoPositionDump).
type memBinlog struct {
	names []string
	files map[string][]Event
}

func newMySQLBinlog(t *testing.T, sid string) *memBinlog {
	t.Helper()
	mb := &memBinlog{files: map[string][]Event{}}
	gno := int64(11)
	for i, prev := range []string{sid + ":1-10", sid + ":1-12"} {
		name := fmt.Sprintf("binlog.%06d", i+1)
		mb.names = append(mb.names, name)
		off := uint32(4)
		add := func(typ replication.EventType, body []byte, boundary bool) {
			size := uint32(headerSize + len(body) + 4)
			raw := buildEvent(typ, 1, 1700000000, off+size, 0, body, true)
			off += size
			mb.files[name] = append(mb.files[name], Event{Data: raw, Type: typ, Pos: sluice.Position{File: name, Pos: off}, Boundary: boundary})
		}
		fde := binary.LittleEndian.AppendUint16(nil, 4)
		fde = append(fde, make([]byte, 50)...)
		copy(fde[2:], "8.0.36")
		fde = append(fde, 0, 0, 0, 0, headerSize)
		fde = append(fde, make([]byte, 41)...) // post-header lengths: not read for these events
		fde = append(fde, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
		add(replication.FORMAT_DESCRIPTION_EVENT, fde, true)
		set, err := mysql.ParseMysqlGTIDSet(prev)
		if err != nil {
			t.Fatal(err)
		}
		add(replication.PREVIOUS_GTIDS_EVENT, set.Encode(), true)
		for k := 0; k < 2; k++ {
			g := []byte{1}
			u, _ := mysql.ParseMysqlGTIDSet(fmt.Sprintf("%s:%d", sid, gno))
			for id := range *u.(*mysql.MysqlGTIDSet) {
				g = append(g, id[:]...)
			}
			g = binary.LittleEndian.AppendUint64(g, uint64(gno))
			add(replication.GTID_EVENT, g, false)
			q := make([]byte, 13) // thread id, exec time, db length 0, error code, no status vars
			q = append(q, 0)
			q = append(q, fmt.Sprintf("CREATE TABLE t%d (a int)", gno)...)
			add(replication.QUERY_EVENT, q, true)
			gno++
		}
		if i == 0 {
			add(replication.ROTATE_EVENT, append(binary.LittleEndian.AppendUint64(nil, 4), "binlog.000002"...), true)
		}
	}
	return mb
}

func (m *memBinlog) Files() []string          { return m.names }
func (m *memBinlog) GTIDPos() (string, error) { return "", nil }
func (m *memBinlog) End() sluice.Position {
	last := m.names[len(m.names)-1]
	return m.files[last][len(m.files[last])-1].Pos
}
func (m *memBinlog) Size(file string) int64 {
	if evs := m.files[file]; len(evs) > 0 {
		return int64(evs[len(evs)-1].Pos.Pos)
	}
	return 0
}
func (m *memBinlog) Has(pos sluice.Position) bool {
	if pos.Pos == 4 {
		return m.files[pos.File] != nil
	}
	for _, ev := range m.files[pos.File] {
		if ev.Pos.Pos == pos.Pos {
			return true
		}
	}
	return false
}
func (m *memBinlog) FDE(file string) ([]byte, error) {
	if evs := m.files[file]; len(evs) > 0 {
		return evs[0].Data, nil
	}
	return nil, fmt.Errorf("no file %s", file)
}
func (m *memBinlog) Open(start sluice.Position) (Reader, error) {
	var all []Event
	for _, n := range m.names {
		all = append(all, m.files[n]...)
	}
	if start.File == "" {
		start = sluice.Position{File: m.names[0], Pos: 4}
	}
	for i, ev := range all {
		if ev.Pos.File == start.File && ev.Pos.Pos-uint32(len(ev.Data)) == start.Pos {
			return &memReader{evs: all[i:], pos: start}, nil
		}
	}
	return nil, fmt.Errorf("no event at %s", start)
}

type memReader struct {
	evs []Event
	pos sluice.Position
}

func (r *memReader) Next(ctx context.Context) (Event, error) {
	if len(r.evs) == 0 {
		<-ctx.Done()
		return Event{}, ctx.Err()
	}
	ev := r.evs[0]
	r.evs, r.pos = r.evs[1:], ev.Pos
	return ev, nil
}
func (r *memReader) Position() sluice.Position { return r.pos }
func (r *memReader) Close() error              { return nil }
