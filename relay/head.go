package relay

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sort"

	"github.com/sluice-db/sluice"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

// A new relay starts at the task's start position, not at offset 4 of its
// file: copying the bytes before it filled small disks and showed a lag of
// minutes for nothing (issue 16). Offsets in the relay must still equal the
// source's, so the first relay file keeps the source's format description
// event and fills the bytes it did not fetch with events that readers know
// how to pass over:
//
//   - a GTID list of the set at the start position (MariaDB Gtid_list,
//     MySQL Previous_gtids), which is what "the transactions before this
//     file" means for a file whose first transaction is at the start;
//   - filler events of type IGNORABLE_LOG_EVENT with the
//     LOG_EVENT_IGNORABLE_F flag, which servers and mariadb-binlog skip
//     whatever their type. Their bodies are zeros and are left as holes in
//     a sparse file, so a gap of hundreds of megabytes costs a few blocks
//     of disk. Each is at most maxFiller bytes, so no reader needs more
//     memory for one than for an ordinary large event.
//
// Readers in this package skip the fillers without loading them.

// fillerTag starts the body of a filler event.
const fillerTag = "sluice"

const (
	ignorableType      = replication.IGNORABLE_EVENT
	logEventIgnorableF = 0x80
	maxFiller          = 16 << 20
	// minFiller: header, tag and the 4-byte tail (checksum or zeros).
	minFiller = headerSize + len(fillerTag) + 4
)

// gtidListEvent returns the GTID list event at offset at for the set at the
// start position.
func gtidListEvent(flavor, gtidSet string, at int64, serverID, ts uint32, checksum bool) ([]byte, error) {
	var body []byte
	var typ replication.EventType
	if flavor == mysql.MySQLFlavor {
		set, err := mysql.ParseMysqlGTIDSet(gtidSet)
		if err != nil {
			return nil, fmt.Errorf("relay: parse GTID set %q: %w", gtidSet, err)
		}
		typ, body = replication.PREVIOUS_GTIDS_EVENT, set.Encode()
	} else {
		b, err := mariaGTIDList(gtidSet)
		if err != nil {
			return nil, err
		}
		typ, body = replication.MARIADB_GTID_LIST_EVENT, b
	}
	crc := 0
	if checksum {
		crc = 4
	}
	return buildEvent(typ, serverID, ts, at, body, 0, crc), nil
}

// fillerSizes splits a gap into filler events of at most maxFiller bytes,
// none smaller than minFiller. ok is false when the gap cannot be filled.
func fillerSizes(gap int64) (sizes []int64, ok bool) {
	if gap == 0 {
		return nil, true
	}
	if gap < int64(minFiller) {
		return nil, false
	}
	for gap > 0 {
		n := min(gap, int64(maxFiller))
		if rest := gap - n; rest > 0 && rest < int64(minFiller) {
			n -= int64(minFiller)
		}
		sizes = append(sizes, n)
		gap -= n
	}
	return sizes, true
}

// fillerParts returns the written parts of a filler event of size bytes at
// offset at: its head (header, tag, text) and its 4-byte tail (checksum, or
// zeros without checksums). The bytes between them are zeros, left as a hole.
func fillerParts(size, at, start int64, serverID, ts uint32, checksum bool) (head, tail []byte) {
	body := size - headerSize - 4
	text := fmt.Sprintf("%s relay: source bytes %d..%d not fetched (the relay starts at %d)\n", fillerTag, at, at+size, start)
	if int64(len(text)) > body {
		text = text[:body]
	}
	head = make([]byte, headerSize, headerSize+len(text))
	binary.LittleEndian.PutUint32(head[0:], ts)
	head[4] = byte(ignorableType)
	binary.LittleEndian.PutUint32(head[5:], serverID)
	binary.LittleEndian.PutUint32(head[9:], uint32(size))
	binary.LittleEndian.PutUint32(head[13:], uint32(at+size))
	binary.LittleEndian.PutUint16(head[17:], logEventIgnorableF)
	head = append(head, text...)
	tail = make([]byte, 4)
	if checksum {
		c := crc32.ChecksumIEEE(head)
		c = crc32Zeros(c, size-4-int64(len(head)))
		binary.LittleEndian.PutUint32(tail, c)
	}
	return head, tail
}

var zeroBlock = make([]byte, 64<<10)

// crc32Zeros extends an IEEE CRC over n zero bytes.
func crc32Zeros(c uint32, n int64) uint32 {
	for n > 0 {
		k := min(n, int64(len(zeroBlock)))
		c = crc32.Update(c, crc32.IEEETable, zeroBlock[:k])
		n -= k
	}
	return c
}

// buildEvent builds one event starting at offset at; crc is the length of
// its checksum trailer (0 or 4).
func buildEvent(typ replication.EventType, serverID, ts uint32, at int64, body []byte, flags uint16, crc int) []byte {
	return binlogev.EncodeAt(typ, serverID, ts, flags, body, crc > 0, at)
}

// mariaGTIDList encodes a Gtid_list event body: a count, then domain,
// server id and sequence number of each GTID.
func mariaGTIDList(set string) ([]byte, error) {
	s, err := mysql.ParseMariadbGTIDSet(set)
	if err != nil {
		return nil, fmt.Errorf("relay: parse GTID set %q: %w", set, err)
	}
	ms := s.(*mysql.MariadbGTIDSet)
	domains := make([]uint32, 0, len(ms.Sets))
	for d := range ms.Sets {
		domains = append(domains, d)
	}
	sort.Slice(domains, func(i, j int) bool { return domains[i] < domains[j] })
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(domains)))
	for _, d := range domains {
		g := ms.Sets[d]
		b = binary.LittleEndian.AppendUint32(b, g.DomainID)
		b = binary.LittleEndian.AppendUint32(b, g.ServerID)
		b = binary.LittleEndian.AppendUint64(b, g.SequenceNumber)
	}
	return b, nil
}

// isFiller reports whether an event whose header is h and whose bytes start
// with prefix (at least headerSize+len(fillerTag) of them) is a filler.
func isFiller(h header, prefix []byte) bool {
	return h.Type == ignorableType && h.Flags&logEventIgnorableF != 0 &&
		len(prefix) >= headerSize+len(fillerTag) && string(prefix[headerSize:headerSize+len(fillerTag)]) == fillerTag
}

// writeHead fills the first relay file from the end of its format
// description event to the start position.
func (w *Writer) writeHead(fde header) error {
	list, err := gtidListEvent(w.l.cfg.Flavor, w.fillGTID, w.size, fde.ServerID, fde.Timestamp, w.checksum)
	if err != nil {
		return err
	}
	sizes, ok := fillerSizes(w.fillTo - w.size - int64(len(list)))
	if !ok {
		return &sluice.Error{Op: "start relay", Err: fmt.Errorf("the %d bytes of %s before the start position %d cannot hold its GTID list and a filler event", w.fillTo-w.size, w.name, w.fillTo),
			Hint: "start the task at the next transaction, or at offset 4 of the file"}
	}
	if _, err := w.bw.Write(list); err != nil {
		return fmt.Errorf("relay: write %s: %w", w.name, err)
	}
	w.size += int64(len(list))
	for _, n := range sizes {
		head, tail := fillerParts(n, w.size, w.fillTo, fde.ServerID, fde.Timestamp, w.checksum)
		if _, err := w.bw.Write(head); err != nil {
			return fmt.Errorf("relay: write %s: %w", w.name, err)
		}
		if err := w.bw.Flush(); err != nil {
			return fmt.Errorf("relay: write %s: %w", w.name, err)
		}
		if _, err := w.f.Seek(n-int64(len(head))-int64(len(tail)), io.SeekCurrent); err != nil {
			return fmt.Errorf("relay: %s: %w", w.name, err)
		}
		if _, err := w.bw.Write(tail); err != nil {
			return fmt.Errorf("relay: write %s: %w", w.name, err)
		}
		w.size += n
	}
	w.unflushed++
	w.dirty = true
	w.boundary = w.size
	w.fillTo = 0
	w.l.setFrom(w.name, w.size)
	return nil
}
