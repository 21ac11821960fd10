// Package binlogev reads and writes the few parts of binlog events that
// the stages handle as raw bytes (the relay log, the binlog service, the
// global binlog's merge): the 19-byte header, the format description
// event's checksum setting, a checksum trailer, and new events. Decoding
// rows is the decoder's business (go-mysql).
package binlogev

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// HeaderSize is the size of an event header (binlog format v4).
const HeaderSize = replication.EventHeaderSize

// Header is an event header.
type Header struct {
	Timestamp uint32
	Type      replication.EventType
	ServerID  uint32
	Size      uint32
	LogPos    uint32
	Flags     uint16
}

// ParseHeader reads the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("event header: %d bytes, need %d", len(b), HeaderSize)
	}
	h := Header{
		Timestamp: binary.LittleEndian.Uint32(b[0:]),
		Type:      replication.EventType(b[4]),
		ServerID:  binary.LittleEndian.Uint32(b[5:]),
		Size:      binary.LittleEndian.Uint32(b[9:]),
		LogPos:    binary.LittleEndian.Uint32(b[13:]),
		Flags:     binary.LittleEndian.Uint16(b[17:]),
	}
	if h.Size < HeaderSize {
		return h, fmt.Errorf("event header: size %d is smaller than the header", h.Size)
	}
	return h, nil
}

// Artificial reports the LOG_EVENT_ARTIFICIAL_F flag: an event a server
// made up for a dump (a Rotate, a Gtid_list), not one of its binlog.
func (h Header) Artificial() bool { return h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 }

// FDEChecksum reports whether events that follow this format description
// event carry a CRC32 trailer. The algorithm byte sits just before the
// FDE's own 4-byte checksum (servers that know checksums always append one).
func FDEChecksum(raw []byte) bool {
	// binlog_version(2) + server_version(50) + create_timestamp(4) + header_length(1)
	const fixed = HeaderSize + 2 + 50 + 4 + 1
	if len(raw) < fixed+5 {
		return false
	}
	ver := string(bytes.TrimRight(raw[HeaderSize+2:HeaderSize+52], "\x00"))
	if !VersionKnowsChecksum(ver) {
		return false
	}
	return raw[len(raw)-5] == byte(replication.BINLOG_CHECKSUM_ALG_CRC32)
}

// VersionKnowsChecksum: MySQL 5.6.1+ and every MariaDB since 5.3 write the
// checksum algorithm into the FDE.
func VersionKnowsChecksum(v string) bool {
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return true
	}
	nums := [3]int{}
	for i, part := range strings.SplitN(v, ".", 3) {
		for _, c := range part {
			if c < '0' || c > '9' {
				break
			}
			nums[i] = nums[i]*10 + int(c-'0')
		}
	}
	maj, mnr, p := nums[0], nums[1], nums[2]
	return maj > 5 || (maj == 5 && (mnr > 6 || (mnr == 6 && p >= 1)))
}

// Body is an event's body: after the header, without the checksum.
func Body(raw []byte, crc bool) []byte {
	b := raw[HeaderSize:]
	if crc && len(b) >= 4 {
		b = b[:len(b)-4]
	}
	return b
}

// Encode builds one event: the header (timestamp, type, server id, size,
// log_pos, flags), the body and, when crc, its CRC32.
func Encode(typ replication.EventType, serverID, ts, logPos uint32, flags uint16, body []byte, crc bool) []byte {
	size := HeaderSize + len(body)
	if crc {
		size += 4
	}
	raw := make([]byte, HeaderSize, size)
	binary.LittleEndian.PutUint32(raw[0:], ts)
	raw[4] = byte(typ)
	binary.LittleEndian.PutUint32(raw[5:], serverID)
	binary.LittleEndian.PutUint32(raw[9:], uint32(size))
	binary.LittleEndian.PutUint32(raw[13:], logPos)
	binary.LittleEndian.PutUint16(raw[17:], flags)
	raw = append(raw, body...)
	if crc {
		raw = binary.LittleEndian.AppendUint32(raw, crc32.ChecksumIEEE(raw))
	}
	return raw
}

// EncodeAt builds an event that starts at offset at of its file: its
// log_pos is the offset after it.
func EncodeAt(typ replication.EventType, serverID, ts uint32, flags uint16, body []byte, crc bool, at int64) []byte {
	size := HeaderSize + len(body)
	if crc {
		size += 4
	}
	return Encode(typ, serverID, ts, uint32(at)+uint32(size), flags, body, crc)
}

// MariaGTIDText is MariadbGTID.String without fmt: "domain-server-seq", ""
// for the zero GTID, in one allocation instead of five (it runs once or
// twice per transaction in the decoder and the relay reader).
func MariaGTIDText(g *mysql.MariadbGTID) string {
	if g.DomainID == 0 && g.ServerID == 0 && g.SequenceNumber == 0 {
		return ""
	}
	var buf [64]byte
	b := strconv.AppendUint(buf[:0], uint64(g.DomainID), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(g.ServerID), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, g.SequenceNumber, 10)
	return string(b)
}
