package relay

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

// The relay handles events as raw bytes: it only needs a few header fields,
// the text of Query events and the GTID events to find transaction
// boundaries. Decoding rows is the decoder's job, which keeps writing and
// tailing cheap.

const (
	headerSize = replication.EventHeaderSize
	fdeType    = replication.FORMAT_DESCRIPTION_EVENT
)

// magic opens every binlog file.
var magic = replication.BinLogFileHeader

// The header and checksum helpers live in internal/binlogev, shared with
// the binlog service and the merge.
type header = binlogev.Header

var (
	parseHeader          = binlogev.ParseHeader
	fdeChecksum          = binlogev.FDEChecksum
	versionKnowsChecksum = binlogev.VersionKnowsChecksum
)

// setLogPos rewrites an event's log_pos and, when it has one, its checksum.
// Servers resend a file's FDE with log_pos 0 when a dump starts mid-file; the
// relay stores it with the position it has in the source's file.
func setLogPos(raw []byte, pos uint32, checksum bool) {
	binary.LittleEndian.PutUint32(raw[13:], pos)
	if checksum && len(raw) >= headerSize+4 {
		binary.LittleEndian.PutUint32(raw[len(raw)-4:], crc32.ChecksumIEEE(raw[:len(raw)-4]))
	}
}

// queryText returns the statement of a QUERY_EVENT body (raw without header),
// trimmed of the checksum.
func queryText(raw []byte, checksum bool) string {
	body := raw[headerSize:]
	if checksum {
		if len(body) < 4 {
			return ""
		}
		body = body[:len(body)-4]
	}
	// thread_id(4) exec_time(4) db_len(1) error_code(2) status_vars_len(2)
	if len(body) < 13 {
		return ""
	}
	dbLen := int(body[8])
	svLen := int(binary.LittleEndian.Uint16(body[11:]))
	off := 13 + svLen + dbLen + 1
	if off > len(body) {
		return ""
	}
	return string(body[off:])
}

// Flags of MariaDB's GTID event.
const (
	mariaFlStandalone = 1
)

// groupTracker finds transaction boundaries: the points between event groups
// where a reader may stop and a writer may resume without splitting a
// transaction. It understands MariaDB (GTID event opens a group; standalone
// groups end after their statement) and MySQL (GTID then BEGIN...XID/COMMIT,
// or GTID then one DDL statement).
type groupTracker struct {
	inGroup    bool
	needCommit bool
}

// step feeds one event and reports whether the position after it is a
// transaction boundary. It reads the bytes of MariaDB GTID and Query events
// only; Open's scan (scanBoundaries) passes nil raw for every other type.
func (t *groupTracker) step(h header, raw []byte, checksum bool) bool {
	switch h.Type {
	case replication.MARIADB_GTID_EVENT:
		t.inGroup = true
		t.needCommit = true
		if len(raw) > headerSize+12 && raw[headerSize+12]&mariaFlStandalone != 0 {
			t.needCommit = false
		}
		return false
	case replication.GTID_EVENT, replication.ANONYMOUS_GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT:
		t.inGroup = true
		t.needCommit = false
		return false
	case replication.QUERY_EVENT, replication.MARIADB_QUERY_COMPRESSED_EVENT:
		var q string
		if h.Type == replication.QUERY_EVENT {
			q = strings.ToUpper(strings.TrimSpace(queryText(raw, checksum)))
		}
		switch {
		case q == "BEGIN" || strings.HasPrefix(q, "XA START") || strings.HasPrefix(q, "XA BEGIN"):
			t.inGroup, t.needCommit = true, true
			return false
		case q == "COMMIT" || q == "ROLLBACK" || strings.HasPrefix(q, "XA COMMIT") || strings.HasPrefix(q, "XA ROLLBACK"):
			t.inGroup, t.needCommit = false, false
			return true
		case t.needCommit:
			return false
		}
		t.inGroup = false
		return true
	case replication.XID_EVENT, replication.XA_PREPARE_LOG_EVENT:
		t.inGroup, t.needCommit = false, false
		return true
	}
	return !t.inGroup
}

// gtidTracker keeps the GTID set executed at the current position, fed from
// the file's GTID list (MariaDB Gtid_list, MySQL Previous_gtids) and from each
// completed group's GTID.
type gtidTracker struct {
	flavor  string
	set     mysql.GTIDSet
	pending string // GTID of the open group, in text form
	// maria is the open group's MariaDB GTID when the set is MariaDB's
	// (pending is then empty): added without a text round trip.
	maria    mysql.MariadbGTID
	hasMaria bool
	text     string // cached set.String()
}

func newGTIDTracker(flavor, start string) (*gtidTracker, error) {
	if flavor == "" {
		flavor = mysql.MariaDBFlavor
	}
	set, err := mysql.ParseGTIDSet(flavor, start)
	if err != nil {
		return nil, fmt.Errorf("relay: parse GTID set %q: %w", start, err)
	}
	return &gtidTracker{flavor: flavor, set: set, text: set.String()}, nil
}

// onEvent updates the set; boundary says the event ended a group. raw
// may be nil for an event of a type it does not read (SkipComments).
func (g *gtidTracker) onEvent(h header, raw []byte, checksum, boundary bool) {
	var body []byte
	if len(raw) >= headerSize {
		body = raw[headerSize:]
	}
	if checksum && len(body) >= 4 {
		body = body[:len(body)-4]
	}
	switch h.Type {
	case replication.MARIADB_GTID_EVENT:
		if len(body) >= 12 {
			seq := binary.LittleEndian.Uint64(body[0:])
			domain := binary.LittleEndian.Uint32(body[8:])
			if _, ok := g.set.(*mysql.MariadbGTIDSet); ok {
				g.maria, g.hasMaria, g.pending = mysql.MariadbGTID{DomainID: domain, ServerID: h.ServerID, SequenceNumber: seq}, true, ""
			} else {
				g.pending = fmt.Sprintf("%d-%d-%d", domain, h.ServerID, seq)
			}
		}
	case replication.GTID_EVENT:
		if len(body) >= 25 {
			g.pending = fmt.Sprintf("%s:%d", uuidString(body[1:17]), binary.LittleEndian.Uint64(body[17:]))
		}
	case replication.MARIADB_GTID_LIST_EVENT:
		if h.Artificial() || g.flavor != mysql.MariaDBFlavor {
			return
		}
		// The list at a file's head is the state before the file; it never
		// moves the set backwards, so merging is safe when we already know more.
		if len(body) >= 4 {
			n := int(binary.LittleEndian.Uint32(body) & 0x0fffffff)
			for i := 0; i < n && 4+16*(i+1) <= len(body); i++ {
				e := body[4+16*i:]
				gt := fmt.Sprintf("%d-%d-%d", binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint64(e[8:]))
				g.add(gt, true)
			}
		}
	case replication.PREVIOUS_GTIDS_EVENT:
		if g.flavor == mysql.MySQLFlavor {
			if s, err := mysql.DecodeMysqlGTIDSet(body); err == nil && g.set.IsEmpty() {
				g.set = s
				g.text = s.String()
			}
		}
	}
	if boundary && g.hasMaria {
		g.addMaria(g.maria)
		g.hasMaria = false
	}
	if boundary && g.pending != "" {
		g.add(g.pending, false)
		g.pending = ""
	}
}

// addMaria is add(m.String(), false) for a MariaDB set, without the text
// round trip: a completed group's GTID, once per transaction (issue 18: the
// Sprintf, the parse and the set's text were a twentieth of the reader's
// allocations). The set's text is built the same way as
// MariadbGTIDSet.String, in one allocation for a single domain.
func (g *gtidTracker) addMaria(m mysql.MariadbGTID) {
	ms := g.set.(*mysql.MariadbGTIDSet)
	if ms.AddSet(&m) != nil {
		mm := m // (a copy, so m itself need not live on the heap)
		ms.Sets[m.DomainID] = &mm
	}
	if len(ms.Sets) != 1 {
		g.text = ms.String()
		return
	}
	for _, one := range ms.Sets {
		g.text = binlogev.MariaGTIDText(one)
	}
}

func (g *gtidTracker) add(gt string, onlyForward bool) {
	if ms, ok := g.set.(*mysql.MariadbGTIDSet); ok {
		m, err := mysql.ParseMariadbGTID(gt)
		if err != nil {
			return
		}
		if cur, ok := ms.Sets[m.DomainID]; ok && onlyForward && cur.SequenceNumber >= m.SequenceNumber {
			return
		}
		if ms.AddSet(m) != nil {
			// A different server's GTID with a lower sequence number in the
			// same domain (failover): take it as the domain's new position.
			ms.Sets[m.DomainID] = m
		}
	} else if err := g.set.Update(gt); err != nil {
		return
	}
	g.text = g.set.String()
}

func uuidString(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}
