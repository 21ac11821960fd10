package serve

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

const (
	headerSize = binlogev.HeaderSize
	// LOG_EVENT_BINLOG_IN_USE_F: the file was open when the FDE was read.
	flagInUse = 0x0001
)

// buildEvent encodes one event (binlogev.Encode).
var buildEvent = binlogev.Encode

// artificialRotate is the Rotate a primary sends before each file of a
// dump: timestamp 0, log_pos 0, the artificial flag, and the position and
// name the replica continues from (sql_repl.cc fake_rotate_event).
func artificialRotate(serverID uint32, name string, pos uint64, crc bool) []byte {
	body := binary.LittleEndian.AppendUint64(nil, pos)
	body = append(body, name...)
	return buildEvent(replication.ROTATE_EVENT, serverID, 0, 0, replication.LOG_EVENT_ARTIFICIAL_F, body, crc)
}

// heartbeat is a HEARTBEAT_LOG_EVENT: the replica checks that its file
// name and log_pos (the position after the last event sent) are its own.
func heartbeat(serverID uint32, name string, pos uint32, crc bool) []byte {
	return buildEvent(replication.HEARTBEAT_EVENT, serverID, 0, pos, replication.LOG_EVENT_ARTIFICIAL_F, []byte(name), crc)
}

// servedFDE is a file's format description event as a primary sends it:
// the in-use flag cleared (the file is being read, not written), and, for
// a dump that starts past the FDE, log_pos 0 so that the replica does not
// move its position to the FDE's (MariaDB 10.11 sends exactly that; the
// creation time stays). raw is not changed.
func servedFDE(raw []byte, midFile, crc bool) []byte {
	ev := append([]byte(nil), raw...)
	flags := binary.LittleEndian.Uint16(ev[17:])
	binary.LittleEndian.PutUint16(ev[17:], flags&^flagInUse)
	if midFile {
		binary.LittleEndian.PutUint32(ev[13:], 0)
	}
	if crc && len(ev) >= headerSize+4 {
		binary.LittleEndian.PutUint32(ev[len(ev)-4:], crc32.ChecksumIEEE(ev[:len(ev)-4]))
	}
	return ev
}
