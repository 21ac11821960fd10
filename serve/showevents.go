package serve

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// SHOW BINLOG EVENTS [IN 'file'] [FROM pos] [LIMIT [offset,] count]
var showEventsRe = regexp.MustCompile(`(?is)^\s*show\s+binlog\s+events(?:\s+in\s+'([^']*)')?(?:\s+from\s+(\d+))?(?:\s+limit\s+(?:(\d+)\s*,\s*)?(\d+))?\s*$`)

// maxShowEvents bounds an answer without LIMIT: the rows are built in
// memory, and a relay file may hold millions of events.
const maxShowEvents = 100000

// showEvents answers SHOW BINLOG EVENTS as MariaDB 10.11 does
// (Log_event::pack_info), from the relay log.
func (h *session) showEvents(m []string) (*mysql.Result, error) {
	files := h.s.log.Files()
	if len(files) == 0 {
		return resultset(showEventsCols, nil)
	}
	name := m[1]
	if name == "" {
		name = files[0]
	}
	from := uint64(4)
	if m[2] != "" {
		from, _ = strconv.ParseUint(m[2], 10, 32)
	}
	offset, count := uint64(0), uint64(maxShowEvents)
	if m[3] != "" {
		offset, _ = strconv.ParseUint(m[3], 10, 64)
	}
	if m[4] != "" {
		count, _ = strconv.ParseUint(m[4], 10, 64)
	}
	start := sluice.Position{File: name, Pos: uint32(max(from, 4))}
	if !h.s.log.Has(start) {
		return nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND,
			fmt.Sprintf("Error when executing command SHOW BINLOG EVENTS: Could not find %s in the served binlog (fix: name a file SHOW BINARY LOGS lists, and a position inside it)", start))
	}
	fde, err := h.s.log.FDE(name)
	if err != nil {
		return nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND, "Error when executing command SHOW BINLOG EVENTS: "+err.Error())
	}
	crc := fdeChecksum(fde)
	end := h.s.log.End()
	r, err := h.s.log.Open(start)
	if err != nil {
		return nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND,
			fmt.Sprintf("Error when executing command SHOW BINLOG EVENTS: Wrong offset or I/O error: %v (fix: FROM an event's position, from an earlier SHOW BINLOG EVENTS)", err))
	}
	defer r.Close()
	// The reader waits for data at the relay's end; the rows stop before.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows [][]any
	for n := uint64(0); n < offset+count; n++ {
		if p := r.Position(); p.File == end.File && p.Pos >= end.Pos {
			break
		}
		ev, err := r.Next(ctx)
		if err != nil {
			return nil, mysql.NewError(mysql.ER_ERROR_WHEN_EXECUTING_COMMAND, "Error when executing command SHOW BINLOG EVENTS: "+err.Error())
		}
		if ev.Pos.File != name {
			break // the next file's first event
		}
		if n < offset {
			continue
		}
		d := ev.Data
		rows = append(rows, []any{name, uint64(ev.Pos.Pos) - uint64(len(d)), eventTypeName(ev.Type),
			uint64(binary.LittleEndian.Uint32(d[5:])), uint64(binary.LittleEndian.Uint32(d[13:])), eventInfo(d, crc)})
	}
	return resultset(showEventsCols, rows)
}

var showEventsCols = []string{"Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"}

// eventTypeName is MariaDB's Log_event::get_type_str.
func eventTypeName(t replication.EventType) string {
	switch t {
	case replication.START_EVENT_V3:
		return "Start_v3"
	case replication.STOP_EVENT:
		return "Stop"
	case replication.QUERY_EVENT:
		return "Query"
	case replication.ROTATE_EVENT:
		return "Rotate"
	case replication.INTVAR_EVENT:
		return "Intvar"
	case replication.RAND_EVENT:
		return "RAND"
	case replication.XID_EVENT:
		return "Xid"
	case replication.USER_VAR_EVENT:
		return "User var"
	case replication.FORMAT_DESCRIPTION_EVENT:
		return "Format_desc"
	case replication.TABLE_MAP_EVENT:
		return "Table_map"
	case replication.WRITE_ROWS_EVENTv1:
		return "Write_rows_v1"
	case replication.UPDATE_ROWS_EVENTv1:
		return "Update_rows_v1"
	case replication.DELETE_ROWS_EVENTv1:
		return "Delete_rows_v1"
	case replication.WRITE_ROWS_EVENTv2:
		return "Write_rows"
	case replication.UPDATE_ROWS_EVENTv2:
		return "Update_rows"
	case replication.DELETE_ROWS_EVENTv2:
		return "Delete_rows"
	case replication.BEGIN_LOAD_QUERY_EVENT:
		return "Begin_load_query"
	case replication.EXECUTE_LOAD_QUERY_EVENT:
		return "Execute_load_query"
	case replication.INCIDENT_EVENT:
		return "Incident"
	case replication.MARIADB_ANNOTATE_ROWS_EVENT:
		return "Annotate_rows"
	case replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
		return "Binlog_checkpoint"
	case replication.MARIADB_GTID_EVENT:
		return "Gtid"
	case replication.MARIADB_GTID_LIST_EVENT:
		return "Gtid_list"
	case replication.MARIADB_START_ENCRYPTION_EVENT:
		return "Start_encryption"
	case replication.MARIADB_QUERY_COMPRESSED_EVENT:
		return "Query_compressed"
	case replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
		return "Write_rows_compressed_v1"
	case replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1:
		return "Update_rows_compressed_v1"
	case replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		return "Delete_rows_compressed_v1"
	case replication.IGNORABLE_EVENT:
		return "Ignorable log event"
	case replication.ROWS_QUERY_EVENT:
		return "MySQL Rows_query"
	case replication.GTID_EVENT:
		return "MySQL Gtid"
	case replication.ANONYMOUS_GTID_EVENT:
		return "MySQL Anonymous_Gtid"
	case replication.PREVIOUS_GTIDS_EVENT:
		return "MySQL Previous_gtids"
	case replication.HEARTBEAT_EVENT:
		return "Heartbeat"
	case replication.XA_PREPARE_LOG_EVENT:
		return "XA_prepare"
	}
	return "Unknown"
}

// MariaDB GTID event flags (log_event.h Gtid_log_event).
const (
	gtidStandalone    = 1
	gtidGroupCommitID = 2
	gtidPreparedXA    = 64
)

// eventInfo is the Info column: what MariaDB's pack_info prints for the
// event types a MariaDB binlog holds; "" for the others.
func eventInfo(d []byte, crc bool) string {
	if len(d) < headerSize {
		return ""
	}
	typ := replication.EventType(d[4])
	flags := binary.LittleEndian.Uint16(d[17:])
	b := d[headerSize:]
	if crc && typ != replication.FORMAT_DESCRIPTION_EVENT && len(b) >= 4 {
		b = b[:len(b)-4]
	}
	u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }
	u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
	cstr := func(s []byte) string {
		if i := strings.IndexByte(string(s), 0); i >= 0 {
			s = s[:i]
		}
		return string(s)
	}
	switch typ {
	case replication.FORMAT_DESCRIPTION_EVENT:
		if len(b) < 52 {
			return ""
		}
		return fmt.Sprintf("Server ver: %s, Binlog ver: %d", cstr(b[2:52]), binary.LittleEndian.Uint16(b))
	case replication.ROTATE_EVENT:
		if len(b) < 8 {
			return ""
		}
		return fmt.Sprintf("%s;pos=%d", b[8:], u64(0))
	case replication.QUERY_EVENT:
		// thread id 4, exec time 4, db length 1, error code 2, status vars length 2
		if len(b) < 13 {
			return ""
		}
		dbLen, varsLen := int(b[8]), int(binary.LittleEndian.Uint16(b[11:]))
		i := 13 + varsLen
		if len(b) < i+dbLen+1 {
			return ""
		}
		db, query := string(b[i:i+dbLen]), string(b[i+dbLen+1:])
		if flags&logEventSuppressUse == 0 && db != "" {
			return "use " + quoteIdent(db) + "; " + query
		}
		return query
	case replication.XID_EVENT:
		if len(b) < 8 {
			return ""
		}
		return fmt.Sprintf("COMMIT /* xid=%d */", u64(0))
	case replication.TABLE_MAP_EVENT:
		// table id 6, flags 2, db length 1, db, 0, table length 1, table, 0
		if len(b) < 9 {
			return ""
		}
		id := uint64(u32(0)) | uint64(binary.LittleEndian.Uint16(b[4:]))<<32
		dl := int(b[8])
		if len(b) < 9+dl+2 {
			return ""
		}
		db := string(b[9 : 9+dl])
		tl := int(b[9+dl+1])
		if len(b) < 9+dl+2+tl {
			return ""
		}
		return fmt.Sprintf("table_id: %d (%s.%s)", id, db, b[9+dl+2:9+dl+2+tl])
	case replication.WRITE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv1,
		replication.WRITE_ROWS_EVENTv2, replication.UPDATE_ROWS_EVENTv2, replication.DELETE_ROWS_EVENTv2,
		replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1:
		if len(b) < 8 {
			return ""
		}
		id := uint64(u32(0)) | uint64(binary.LittleEndian.Uint16(b[4:]))<<32
		s := fmt.Sprintf("table_id: %d", id)
		if binary.LittleEndian.Uint16(b[6:])&1 != 0 { // STMT_END_F
			s += " flags: STMT_END_F"
		}
		return s
	case replication.MARIADB_ANNOTATE_ROWS_EVENT:
		return string(b)
	case replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
		if len(b) < 4 || len(b) < 4+int(u32(0)) {
			return ""
		}
		return string(b[4 : 4+u32(0)])
	case replication.MARIADB_GTID_LIST_EVENT:
		if len(b) < 4 {
			return ""
		}
		n := int(u32(0) & 0x0fffffff)
		parts := make([]string, 0, n)
		for i := 0; i < n && 4+16*(i+1) <= len(b); i++ {
			o := 4 + 16*i
			parts = append(parts, fmt.Sprintf("%d-%d-%d", u32(o), u32(o+4), u64(o+8)))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case replication.MARIADB_GTID_EVENT:
		return gtidInfo(b, binary.LittleEndian.Uint32(d[5:]))
	case replication.INTVAR_EVENT:
		if len(b) < 9 {
			return ""
		}
		name := "INSERT_ID"
		if b[0] == 1 {
			name = "LAST_INSERT_ID"
		}
		return fmt.Sprintf("%s=%d", name, u64(1))
	case replication.XA_PREPARE_LOG_EVENT:
		// one phase 1, format id 4, gtrid length 4, bqual length 4, data
		if len(b) < 13 {
			return ""
		}
		gl, bl := int(u32(5)), int(u32(9))
		if gl < 0 || bl < 0 || len(b) < 13+gl+bl {
			return ""
		}
		xid := fmt.Sprintf("X'%s',X'%s',%d", hex.EncodeToString(b[13:13+gl]), hex.EncodeToString(b[13+gl:13+gl+bl]), u32(1))
		if b[0] != 0 {
			return "XA COMMIT " + xid + " ONE PHASE"
		}
		return "XA PREPARE " + xid
	case replication.RAND_EVENT:
		if len(b) < 16 {
			return ""
		}
		return fmt.Sprintf("rand_seed1=%d,rand_seed2=%d", u64(0), u64(8))
	}
	return ""
}

// LOG_EVENT_SUPPRESS_USE_F: a Query event whose database is not to be
// printed as "use db".
const logEventSuppressUse = 0x8

// gtidInfo is Gtid_log_event::pack_info: sequence number 8, domain 4,
// flags 1, then the group commit id and an XA transaction's xid.
func gtidInfo(b []byte, serverID uint32) string {
	if len(b) < 13 {
		return ""
	}
	seq, domain, fl := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), b[12]
	rest := b[13:]
	var cid uint64
	if fl&gtidGroupCommitID != 0 && len(rest) >= 8 {
		cid = binary.LittleEndian.Uint64(rest)
		rest = rest[8:]
	}
	var s strings.Builder
	switch {
	case fl&gtidStandalone != 0:
		s.WriteString("GTID ")
	case fl&gtidPreparedXA != 0:
		s.WriteString("XA START ")
		if len(rest) >= 6 {
			format := binary.LittleEndian.Uint32(rest)
			gl, bl := int(rest[4]), int(rest[5])
			if len(rest) >= 6+gl+bl {
				fmt.Fprintf(&s, "X'%s',X'%s',%d GTID ", hex.EncodeToString(rest[6:6+gl]), hex.EncodeToString(rest[6+gl:6+gl+bl]), format)
			}
		}
	default:
		s.WriteString("BEGIN GTID ")
	}
	fmt.Fprintf(&s, "%d-%d-%d", domain, serverID, seq)
	if fl&gtidGroupCommitID != 0 {
		fmt.Fprintf(&s, " cid=%d", cid)
	}
	return s.String()
}

// quoteIdent quotes an identifier with backticks, as SHOW statements do.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
