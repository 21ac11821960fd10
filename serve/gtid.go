package serve

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// gtidState is a MariaDB GTID position: the last sequence number per
// domain (@slave_connect_state, a Gtid_list event).
type gtidState map[uint32]uint64

// parseState reads "d-s-n,d-s-n" (empty: no GTIDs yet).
func parseState(s string) (gtidState, error) {
	st := gtidState{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed GTID %q", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		_, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("malformed GTID %q", part)
		}
		if _, dup := st[uint32(d)]; dup {
			return nil, fmt.Errorf("domain %d appears twice in %q", d, s)
		}
		st[uint32(d)] = n
	}
	return st, nil
}

// eventBody is an event's body without its checksum.
func eventBody(raw []byte, crc bool) []byte {
	b := raw[headerSize:]
	if crc && len(b) >= 4 {
		b = b[:len(b)-4]
	}
	return b
}

// gtidOf reads a MariaDB GTID event: domain and sequence number.
func gtidOf(raw []byte, crc bool) (domain uint32, seq uint64, ok bool) {
	b := eventBody(raw, crc)
	if len(b) < 12 {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint64(b), true
}

// gtidList reads a Gtid_list event: the state before the file.
func gtidList(raw []byte, crc bool) gtidState {
	b := eventBody(raw, crc)
	st := gtidState{}
	if len(b) < 4 {
		return st
	}
	n := int(binary.LittleEndian.Uint32(b) & 0x0fffffff)
	for i := 0; i < n && 4+16*(i+1) <= len(b); i++ {
		e := b[4+16*i:]
		d, seq := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint64(e[8:])
		if seq > st[d] {
			st[d] = seq
		}
	}
	return st
}

// missing names what a replica at want lacks that the binlog no longer
// holds, given the state before the binlog's first file; "" when nothing.
func missing(want, before gtidState) string {
	for d, seq := range before {
		if seq > want[d] {
			return fmt.Sprintf("domain %d: the served binlog starts after %d-?-%d, the replica is at %d", d, d, seq, want[d])
		}
	}
	return ""
}
