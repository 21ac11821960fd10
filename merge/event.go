package merge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

// The merge handles events as bytes: it rewrites a few header fields, the
// domain of GTID events and the table id of table map and rows events, and
// leaves every other byte as the source wrote it. Decoding rows is not its
// job, which keeps it cheap and keeps the events identical to what a
// replica of the source would apply.

const (
	headerSize = replication.EventHeaderSize
	// fdeFixed: binlog_version(2) + server_version(50) + create_timestamp(4) + header_length(1).
	fdeFixed = 2 + 50 + 4 + 1
)

var magic = replication.BinLogFileHeader

// The event header is internal/binlogev's, shared with the relay and serve.
var parseHeader = binlogev.ParseHeader

// format is what the merge needs of a source file's format description
// event: whether events carry a CRC32 trailer and the post-header lengths
// (which say how wide a table id is).
type format struct {
	crc        bool
	postHeader []byte // indexed by event type - 1
	version    string
	raw        []byte
}

// parseFDE reads a format description event as stored (header, body and,
// for servers that know checksums, the algorithm byte and 4 checksum
// bytes). MariaDB 5.3+ and MySQL 5.6.1+ always write the algorithm byte.
func parseFDE(raw []byte) (format, error) {
	h, err := parseHeader(raw)
	if err != nil {
		return format{}, err
	}
	if h.Type != replication.FORMAT_DESCRIPTION_EVENT || len(raw) < headerSize+fdeFixed+5 || int(h.Size) != len(raw) {
		return format{}, fmt.Errorf("not a format description event (type %d, %d bytes)", h.Type, len(raw))
	}
	body := raw[headerSize:]
	f := format{version: string(bytes.TrimRight(body[2:52], "\x00")), raw: raw}
	if int(body[56]) != headerSize {
		return format{}, fmt.Errorf("format description event: header length %d, want %d", body[56], headerSize)
	}
	// The algorithm byte precedes the 4 checksum bytes.
	f.crc = raw[len(raw)-5] == byte(replication.BINLOG_CHECKSUM_ALG_CRC32)
	f.postHeader = body[fdeFixed : len(body)-5]
	return f, nil
}

// tableIDWidth is the width of the table id in the post header of events
// of type t: 4 bytes where the post header is 6 bytes long (old servers),
// else 6.
func (f format) tableIDWidth(t replication.EventType) int {
	if i := int(t) - 1; i >= 0 && i < len(f.postHeader) && f.postHeader[i] == 6 {
		return 4
	}
	return 6
}

// compatible reports how g differs from f where it matters to events the
// merge copies: the post-header lengths of every type both know.
func (f format) compatible(g format) error {
	n := min(len(f.postHeader), len(g.postHeader))
	for i := 0; i < n; i++ {
		if f.postHeader[i] != g.postHeader[i] {
			return fmt.Errorf("event type %d has a %d-byte post header in one source's binlog (%s) and %d bytes in another's (%s)",
				i+1, f.postHeader[i], f.version, g.postHeader[i], g.version)
		}
	}
	return nil
}

// body is an event's body without its checksum.
func body(raw []byte, crc bool) []byte {
	b := raw[headerSize:]
	if crc && len(b) >= 4 {
		b = b[:len(b)-4]
	}
	return b
}

// isRows: events whose post header starts with a table id.
func isRows(t replication.EventType) bool {
	switch t {
	case replication.WRITE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv0, replication.DELETE_ROWS_EVENTv0,
		replication.WRITE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv1,
		replication.WRITE_ROWS_EVENTv2, replication.UPDATE_ROWS_EVENTv2, replication.DELETE_ROWS_EVENTv2,
		replication.PARTIAL_UPDATE_ROWS_EVENT,
		replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1,
		replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1,
		169, 170, 171: // MariaDB's WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT (v2 layout)
		return true
	}
	return false
}

func getUint(b []byte, width int) uint64 {
	var v uint64
	for i := width - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func putUint(b []byte, width int, v uint64) {
	for i := 0; i < width; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// tableName reads the schema and table of a TABLE_MAP body (after the
// table id and 2 flag bytes).
func tableName(b []byte, width int) (string, bool) {
	p := width + 2
	if len(b) < p+1 {
		return "", false
	}
	dl := int(b[p])
	if len(b) < p+1+dl+2 {
		return "", false
	}
	db := string(b[p+1 : p+1+dl])
	p += 1 + dl + 1
	tl := int(b[p])
	if len(b) < p+1+tl {
		return "", false
	}
	return db + "." + string(b[p+1:p+1+tl]), true
}

// gtidOf reads a MariaDB GTID event body: sequence number and domain.
func gtidOf(b []byte) (seq uint64, domain uint32, ok bool) {
	if len(b) < 13 {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]), true
}

// encode builds an event at offset at with a CRC32 trailer: the merged
// binlog always carries checksums, whatever its sources do.
func encode(typ replication.EventType, serverID, ts uint32, flags uint16, b []byte, at int64) []byte {
	return encodePatched(typ, serverID, ts, flags, b, at, patch{})
}

// patch is an unsigned little-endian field of width bytes (none when 0)
// at off in an event's body, set to v.
type patch struct {
	off, width int
	v          uint64
}

// encodePatched is encode with p applied to the body's copy.
func encodePatched(typ replication.EventType, serverID, ts uint32, flags uint16, b []byte, at int64, p patch) []byte {
	size := headerSize + len(b) + 4
	raw := make([]byte, headerSize, size)
	binary.LittleEndian.PutUint32(raw[0:], ts)
	raw[4] = byte(typ)
	binary.LittleEndian.PutUint32(raw[5:], serverID)
	binary.LittleEndian.PutUint32(raw[9:], uint32(size))
	binary.LittleEndian.PutUint32(raw[13:], uint32(at)+uint32(size))
	binary.LittleEndian.PutUint16(raw[17:], flags)
	raw = append(raw, b...)
	if p.width > 0 {
		putUint(raw[headerSize+p.off:], p.width, p.v)
	}
	return binary.LittleEndian.AppendUint32(raw, crc32.ChecksumIEEE(raw))
}

// fdeEvent is the merged file's format description event: the source's
// version and post-header lengths (so its events read the same), CRC32 on,
// no creation time (a replica takes a non-zero one for a server restart
// and drops its temporary tables).
func fdeEvent(src format, serverID, ts uint32, at int64) []byte {
	b := make([]byte, 0, fdeFixed+len(src.postHeader)+1)
	b = binary.LittleEndian.AppendUint16(b, 4)
	var ver [50]byte
	copy(ver[:], src.version)
	b = append(b, ver[:]...)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, headerSize)
	b = append(b, src.postHeader...)
	b = append(b, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
	return encode(replication.FORMAT_DESCRIPTION_EVENT, serverID, ts, 0, b, at)
}

// gtid is the last transaction of one domain.
type gtid struct {
	ServerID uint32 `json:"server_id"`
	Seq      uint64 `json:"seq"`
}

// state is a MariaDB GTID position: the last GTID per domain.
type state map[uint32]gtid

func (s state) String() string {
	ds := s.domains()
	var b bytes.Buffer
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d-%d", d, s[d].ServerID, s[d].Seq)
	}
	return b.String()
}

func (s state) domains() []uint32 {
	ds := make([]uint32, 0, len(s))
	for d := range s {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

func (s state) clone() state {
	c := make(state, len(s))
	for d, g := range s {
		c[d] = g
	}
	return c
}

// gtidListEvent: the GTID state before the file.
func gtidListEvent(s state, serverID, ts uint32, at int64) []byte {
	ds := s.domains()
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(ds)))
	for _, d := range ds {
		b = binary.LittleEndian.AppendUint32(b, d)
		b = binary.LittleEndian.AppendUint32(b, s[d].ServerID)
		b = binary.LittleEndian.AppendUint64(b, s[d].Seq)
	}
	return encode(replication.MARIADB_GTID_LIST_EVENT, serverID, ts, 0, b, at)
}

// parseGTIDList reads a Gtid_list body into s.
func parseGTIDList(b []byte, s state) {
	if len(b) < 4 {
		return
	}
	n := int(binary.LittleEndian.Uint32(b) & 0x0fffffff)
	for i := 0; i < n && 4+16*(i+1) <= len(b); i++ {
		e := b[4+16*i:]
		s[binary.LittleEndian.Uint32(e)] = gtid{ServerID: binary.LittleEndian.Uint32(e[4:]), Seq: binary.LittleEndian.Uint64(e[8:])}
	}
}

// checkpointEvent: MariaDB's Binlog_checkpoint names the oldest file a
// crash recovery of the server would need; the merged binlog needs none
// but its current file.
func checkpointEvent(name string, serverID, ts uint32, at int64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	return encode(replication.MARIADB_BINLOG_CHECKPOINT_EVENT, serverID, ts, 0, b, at)
}

// rotateEvent ends a file and names the next one.
func rotateEvent(next string, serverID, ts uint32, at int64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, 4)
	b = append(b, next...)
	return encode(replication.ROTATE_EVENT, serverID, ts, 0, b, at)
}

// ArtificialRotate is what a primary sends before a file: it opens the
// file name at pos without being part of it (relay.Writer opens the file).
func ArtificialRotate(name string, pos uint64, serverID uint32) []byte {
	b := binary.LittleEndian.AppendUint64(nil, pos)
	b = append(b, name...)
	raw := encode(replication.ROTATE_EVENT, serverID, 0, replication.LOG_EVENT_ARTIFICIAL_F, b, 0)
	binary.LittleEndian.PutUint32(raw[13:], 0)
	binary.LittleEndian.PutUint32(raw[len(raw)-4:], crc32.ChecksumIEEE(raw[:len(raw)-4]))
	return raw
}
