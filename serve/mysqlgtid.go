package serve

import (
	"encoding/binary"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"
)

// dumpGTID handles COM_BINLOG_DUMP_GTID, MySQL's auto-position dump:
// flags 2, server id 4, file name length 4, file name, position 8, then
// the length 4 and the replica's executed GTID set in MySQL's binary
// encoding. go-mysql sends the set without the BINLOG_THROUGH_GTID flag,
// so the set is read whenever it is there.
func (h *session) dumpGTID(data []byte) error {
	bad := func(what string) error {
		return mysql.NewError(mysql.ER_MALFORMED_PACKET, "COM_BINLOG_DUMP_GTID: "+what+" (fix: a MySQL 5.6+ replica or client sends a well-formed command; check what connects)")
	}
	if len(data) < 10 {
		return bad("too short")
	}
	req := dumpRequest{flags: binary.LittleEndian.Uint16(data), replicaID: binary.LittleEndian.Uint32(data[2:])}
	n := int(binary.LittleEndian.Uint32(data[6:]))
	rest := data[10:]
	if n < 0 || len(rest) < n+8 {
		return bad("truncated file name or position")
	}
	req.name = string(rest[:n])
	p := binary.LittleEndian.Uint64(rest[n:])
	if p > 1<<32-1 {
		return bad(fmt.Sprintf("position %d", p))
	}
	req.pos = uint32(p)
	rest = rest[n+8:]
	empty := mysql.NewMysqlGTIDSet()
	set := &empty
	if len(rest) >= 4 {
		size := int(binary.LittleEndian.Uint32(rest))
		if len(rest) < 4+size {
			return bad("truncated GTID set")
		}
		if size > 0 {
			s, err := mysql.DecodeMysqlGTIDSet(rest[4 : 4+size])
			if err != nil {
				return bad("GTID set: " + err.Error())
			}
			set = s
		}
	}
	req.mysqlWant = set
	return h.stream(req)
}

// previousGTIDs decodes a Previous_gtids event: the set executed before
// the file.
func previousGTIDs(raw []byte, crc bool) (*mysql.MysqlGTIDSet, error) {
	return mysql.DecodeMysqlGTIDSet(eventBody(raw, crc))
}

// mysqlFilter decides, in MySQL GTID mode, whether an event goes to the
// replica, as MySQL's sender does: the first file's Previous_gtids must be
// in the replica's set (else the replica needs purged transactions: ERR
// 1236), and every transaction whose GTID the replica has is skipped.
func (d *dumper) mysqlFilter(ev Event) (bool, error) {
	switch ev.Type {
	case replication.PREVIOUS_GTIDS_EVENT:
		if !d.headSeen {
			d.headSeen = true
			prev, err := previousGTIDs(ev.Data, d.fileCRC)
			if err == nil && !d.mysqlWant.Contain(prev) {
				err := errDump("The slave is connecting using CHANGE MASTER TO MASTER_AUTO_POSITION = 1, but the master has purged binary logs containing GTIDs that the slave requires: the served binlog starts after %s, the replica has %s (fix: start the replica from a GTID set the service holds, or start the service earlier)", prev, d.mysqlWant)
				d.fail(err)
				return false, err
			}
		}
		return true, nil
	case replication.GTID_EVENT:
		// flags 1, source uuid 16, transaction number 8
		b := eventBody(ev.Data, d.fileCRC)
		d.skipping = false
		if len(b) >= 25 {
			sid, err := uuid.FromBytes(b[1:17])
			if err == nil {
				one := mysql.NewMysqlGTIDSet()
				one.AddGTID(sid, int64(binary.LittleEndian.Uint64(b[17:])))
				d.skipping = d.mysqlWant.Contain(&one)
			}
		}
		if d.skipping && ev.Boundary {
			d.skipping = false
			return false, nil
		}
		return !d.skipping, nil
	case replication.ANONYMOUS_GTID_EVENT:
		d.skipping = false
		return true, nil
	}
	if d.skipping {
		if ev.Boundary {
			d.skipping = false
		}
		return false, nil
	}
	return true, nil
}
