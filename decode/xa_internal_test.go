package decode

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

func TestParseXID(t *testing.T) {
	for _, c := range []struct{ in, want, rest string }{
		{"'x1'", "X'7831',X'',1", ""},
		{"X'7831',X'',1", "X'7831',X'',1", ""},
		{"'x3','b3',7", "X'7833',X'6233',7", ""},
		{"x'0a' , x'0B' , 4294967295 ONE PHASE", "X'0a',X'0b',4294967295", " ONE PHASE"},
		{"0x0a0b,'q'", "X'0a0b',X'71',1", ""},
		{`'it''s','a\'b'`, "X'69742773',X'612762',1", ""},
	} {
		got, rest, err := parseXID(c.in)
		if err != nil || got != c.want || rest != c.rest {
			t.Errorf("parseXID(%q) = %q, %q, %v; want %q, %q", c.in, got, rest, err, c.want, c.rest)
		}
	}
	for _, bad := range []string{"", "'open", "X'zz'", "''", "'a',"} {
		if got, _, err := parseXID(bad); err == nil {
			t.Errorf("parseXID(%q) = %q, want an error", bad, got)
		}
	}
}

// mariaGTID builds a MariaDB GTID event as the server writes it (header,
// seq_no, domain, flags2, [commit id], [XID]).
func mariaGTID(seq uint64, flags byte, cid uint64, gtrid, bqual string, format uint32) *replication.BinlogEvent {
	b := make([]byte, 19, 64)
	b[4] = byte(replication.MARIADB_GTID_EVENT)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, flags)
	if flags&mariaFlGroupCommitID != 0 {
		b = binary.LittleEndian.AppendUint64(b, cid)
	}
	if flags&(mariaFlPreparedXA|mariaFlCompletedXA) != 0 {
		b = binary.LittleEndian.AppendUint32(b, format)
		b = append(b, byte(len(gtrid)), byte(len(bqual)))
		b = append(b, gtrid+bqual...)
	}
	e := &replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}, Flags: flags, CommitID: cid}
	return &replication.BinlogEvent{RawData: b, Header: &replication.EventHeader{EventType: replication.MARIADB_GTID_EVENT, ServerID: 1}, Event: e}
}

func queryEv(q string) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: replication.QUERY_EVENT}, Event: &replication.QueryEvent{Query: []byte(q)}}
}

func xaPrepareEv(onePhase byte, gtrid, bqual string, format uint32) *replication.BinlogEvent {
	b := []byte{onePhase}
	b = binary.LittleEndian.AppendUint32(b, format)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(gtrid)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(bqual)))
	b = append(b, gtrid+bqual...)
	return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: replication.XA_PREPARE_LOG_EVENT}, Event: &replication.GenericEvent{Data: b}}
}

func feedAll(t *testing.T, d *Decoder, evs ...*replication.BinlogEvent) ([]sluice.StreamItem, error) {
	t.Helper()
	var out []sluice.StreamItem
	for i, ev := range evs {
		items, err := d.Feed(ev, sluice.Position{File: "bin.000001", Pos: uint32(100 * (i + 1))})
		if err != nil {
			return out, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func kinds(items []sluice.StreamItem) string {
	var s []string
	for _, it := range items {
		k := it.Kind.String()
		if it.XID != "" {
			k += "(" + it.XID + ")"
		}
		s = append(s, k)
	}
	return strings.Join(s, " ")
}

// TestXAMariaDBGroups feeds the groups MariaDB 10.11 writes (recorded with
// mariadb-binlog): a prepare group whose GTID carries the XID, after a
// group commit id, and its completion from another session.
func TestXAMariaDBGroups(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	items, err := feedAll(t, d,
		mariaGTID(17, 0x48|mariaFlGroupCommitID, 99, "m2", "", 1),
		queryEv("XA END X'6d32',X'',1"),
		xaPrepareEv(0, "m2", "", 1),
		mariaGTID(18, 0x89, 0, "m2", "", 1),
		queryEv("XA COMMIT X'6d32',X'',1"),
		mariaGTID(19, 0x48, 0, "x5", "bq", 7),
		queryEv("XA END X'7835',X'6271',7"),
		xaPrepareEv(0, "x5", "bq", 7),
		mariaGTID(20, 0x89, 0, "x5", "bq", 7),
		queryEv("XA ROLLBACK X'7835',X'6271',7"),
		// XA rolled back before PREPARE after a non-transactional change.
		mariaGTID(21, 0x08, 0, "", "", 0),
		queryEv("ROLLBACK"),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := "begin(X'6d32',X'',1) xa-prepare(X'6d32',X'',1) xa-commit(X'6d32',X'',1) begin(X'7835',X'6271',7) xa-prepare(X'7835',X'6271',7) xa-rollback(X'7835',X'6271',7) begin rollback"
	if got := kinds(items); got != want {
		t.Fatalf("items %s\nwant  %s", got, want)
	}
	if items[1].End.GTIDSet != "0-1-17" || items[2].End.GTIDSet != "0-1-18" || items[2].GTID != "0-1-18" || items[2].End.Pos != 500 {
		t.Fatalf("prepare end %v, commit %s end %v", items[1].End, items[2].GTID, items[2].End)
	}
}

// TestXAMySQLGroups feeds MySQL's shapes: XA START as a statement, a
// one-phase commit as a statement or as an XA_PREPARE event with
// one_phase set, and a two-phase commit in its own group.
func TestXAMySQLGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flavor = "mysql"
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	gtid := func(gno int64) *replication.BinlogEvent {
		return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: replication.GTID_EVENT}, Event: &replication.GTIDEvent{SID: make([]byte, 16), GNO: gno}}
	}
	items, err := feedAll(t, d,
		gtid(1), queryEv("XA START X'61',X'',1"), queryEv("XA END X'61',X'',1"), queryEv("XA COMMIT X'61',X'',1 ONE PHASE"),
		gtid(2), queryEv("XA START X'62',X'',1"), queryEv("XA END X'62',X'',1"), xaPrepareEv(1, "b", "", 1),
		gtid(3), queryEv("XA START X'63',X'',1"), queryEv("XA END X'63',X'',1"), xaPrepareEv(0, "c", "", 1),
		gtid(4), queryEv("XA COMMIT X'63',X'',1"),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := "begin commit begin commit begin xa-prepare(X'63',X'',1) xa-commit(X'63',X'',1)"
	if got := kinds(items); got != want {
		t.Fatalf("items %s\nwant  %s", got, want)
	}
}

// TestXAUnknownShapes: anything the decoder cannot place stops it with a
// message naming the statement, never a silent drop.
func TestXAUnknownShapes(t *testing.T) {
	for name, evs := range map[string][]*replication.BinlogEvent{
		"recover":         {mariaGTID(1, 0x89, 0, "a", "", 1), queryEv("XA RECOVER")},
		"end of another":  {mariaGTID(1, 0x48, 0, "a", "", 1), queryEv("XA END X'62',X'',1")},
		"prepare alone":   {xaPrepareEv(0, "a", "", 1)},
		"commit mismatch": {mariaGTID(1, 0x89, 0, "a", "", 1), queryEv("XA COMMIT X'62',X'',1")},
		"truncated gtid":  {{RawData: make([]byte, 30), Header: &replication.EventHeader{EventType: replication.MARIADB_GTID_EVENT}, Event: &replication.MariadbGTIDEvent{Flags: 0x48}}},
	} {
		d, _ := New(DefaultConfig(), nil)
		_, err := feedAll(t, d, evs...)
		var se *sluice.Error
		if err == nil || !errors.As(err, &se) || se.Hint == "" {
			t.Errorf("%s: got %v, want a sluice.Error with a hint", name, err)
		}
	}
}

// TestXACommitSkipped: sluice skip of an XA COMMIT's GTID (the fix named
// when its prepare was never read) drops the held rows instead of applying
// them; sluice replace cannot stand for it.
func TestXACommitSkipped(t *testing.T) {
	for _, h := range []*Handling{{Skip: true}, {SQL: []string{"DO 1"}}} {
		cfg := DefaultConfig()
		cfg.Handle = func(gtid string, _ sluice.Position) *Handling {
			if gtid == "0-1-18" {
				return h
			}
			return nil
		}
		d, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		items, err := feedAll(t, d, mariaGTID(18, 0x89, 0, "m2", "", 1), queryEv("XA COMMIT X'6d32',X'',1"))
		if h.Skip {
			if err != nil || kinds(items) != "xa-rollback(X'6d32',X'',1)" {
				t.Fatalf("skip: %s, %v", kinds(items), err)
			}
		} else if err == nil {
			t.Fatalf("replace: got %s, want an error", kinds(items))
		}
	}
}
