package relay

import (
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// event builds a raw event without checksum.
func event(typ replication.EventType, body []byte) (header, []byte) {
	raw := make([]byte, headerSize+len(body))
	raw[4] = byte(typ)
	binary.LittleEndian.PutUint32(raw[9:], uint32(len(raw)))
	copy(raw[headerSize:], body)
	h, _ := parseHeader(raw)
	return h, raw
}

func query(q string) []byte {
	b := make([]byte, 13, 13+1+len(q))
	b = append(b, 0) // empty db, NUL
	return append(b, q...)
}

func mariaGTID(flags byte) []byte {
	b := make([]byte, 13)
	b[12] = flags
	return b
}

// Boundaries on event sequences of both flavours, as recorded from servers:
// a position is a boundary only between whole transactions.
func TestGroupBoundaries(t *testing.T) {
	type ev struct {
		typ  replication.EventType
		body []byte
		want bool
	}
	cases := map[string][]ev{
		"mariadb transaction": {
			{replication.MARIADB_GTID_EVENT, mariaGTID(8), false},
			{replication.MARIADB_ANNOTATE_ROWS_EVENT, []byte("insert"), false},
			{replication.TABLE_MAP_EVENT, nil, false},
			{replication.WRITE_ROWS_EVENTv1, nil, false},
			{replication.XID_EVENT, make([]byte, 8), true},
			{replication.MARIADB_BINLOG_CHECKPOINT_EVENT, nil, true},
		},
		"mariadb DDL (standalone)": {
			{replication.MARIADB_GTID_EVENT, mariaGTID(1), false},
			{replication.QUERY_EVENT, query("ALTER TABLE t ADD c int"), true},
		},
		"mariadb non-transactional commit": {
			{replication.MARIADB_GTID_EVENT, mariaGTID(0), false},
			{replication.TABLE_MAP_EVENT, nil, false},
			{replication.WRITE_ROWS_EVENTv1, nil, false},
			{replication.QUERY_EVENT, query("COMMIT"), true},
		},
		"mysql transaction": {
			{replication.GTID_EVENT, make([]byte, 42), false},
			{replication.QUERY_EVENT, query("BEGIN"), false},
			{replication.ROWS_QUERY_EVENT, nil, false},
			{replication.TABLE_MAP_EVENT, nil, false},
			{replication.UPDATE_ROWS_EVENTv2, nil, false},
			{replication.XID_EVENT, make([]byte, 8), true},
		},
		"mysql DDL": {
			{replication.ANONYMOUS_GTID_EVENT, make([]byte, 42), false},
			{replication.QUERY_EVENT, query("CREATE TABLE t (id int)"), true},
		},
		"file head": {
			{replication.FORMAT_DESCRIPTION_EVENT, nil, true},
			{replication.PREVIOUS_GTIDS_EVENT, nil, true},
			{replication.MARIADB_GTID_LIST_EVENT, make([]byte, 4), true},
		},
	}
	for name, evs := range cases {
		var g groupTracker
		for i, e := range evs {
			h, raw := event(e.typ, e.body)
			if got := g.step(h, raw, false); got != e.want {
				t.Errorf("%s: event %d (%s): boundary=%v, want %v", name, i, e.typ, got, e.want)
			}
		}
	}
}

func TestQueryTextWithChecksum(t *testing.T) {
	_, raw := event(replication.QUERY_EVENT, append(query("BEGIN"), 1, 2, 3, 4))
	if q := queryText(raw, true); q != "BEGIN" {
		t.Fatalf("queryText = %q", q)
	}
}

func TestVersionKnowsChecksum(t *testing.T) {
	for v, want := range map[string]bool{"5.5.40": false, "5.6.0": false, "5.6.1": true, "5.7.44-log": true, "8.0.36": true, "10.11.19-MariaDB-log": true} {
		if got := versionKnowsChecksum(v); got != want {
			t.Errorf("%s: %v", v, got)
		}
	}
}
