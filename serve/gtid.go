package serve

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

// gtid is one MariaDB GTID.
type gtid struct {
	domain, server uint32
	seq            uint64
}

// gtidState is a replica's MariaDB GTID position (@slave_connect_state):
// its last GTID per domain.
type gtidState map[uint32]gtid

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
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("malformed GTID %q", part)
		}
		if _, dup := st[uint32(d)]; dup {
			return nil, fmt.Errorf("domain %d appears twice in %q", d, s)
		}
		st[uint32(d)] = gtid{uint32(d), uint32(sv), n}
	}
	return st, nil
}

// binlogState is the binlog's GTID state at a point (rpl_binlog_state):
// the last GTID of each domain and server id, in the order first seen.
type binlogState struct {
	list []gtid
}

// update records g as the last of its domain and server id.
func (b *binlogState) update(g gtid) {
	for i := range b.list {
		if b.list[i].domain == g.domain && b.list[i].server == g.server {
			b.list[i].seq = g.seq
			return
		}
	}
	b.list = append(b.list, g)
}

// last is the highest sequence number per domain.
func (b *binlogState) last() map[uint32]uint64 {
	m := map[uint32]uint64{}
	for _, g := range b.list {
		m[g.domain] = max(m[g.domain], g.seq)
	}
	return m
}

// body is a Gtid_list event's body: count (flags in its top 4 bits), then
// domain, server id and sequence number of each GTID.
func (b *binlogState) body() []byte {
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(b.list)))
	for _, g := range b.list {
		out = binary.LittleEndian.AppendUint32(out, g.domain)
		out = binary.LittleEndian.AppendUint32(out, g.server)
		out = binary.LittleEndian.AppendUint64(out, g.seq)
	}
	return out
}

// eventBody is an event's body without its checksum.
var eventBody = binlogev.Body

// gtidOf reads a MariaDB GTID event: sequence number 8, domain 4; the
// server id is the header's.
func gtidOf(raw []byte, crc bool) (gtid, bool) {
	b := eventBody(raw, crc)
	if len(b) < 12 {
		return gtid{}, false
	}
	return gtid{binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(raw[5:]), binary.LittleEndian.Uint64(b)}, true
}

// gtidList reads a Gtid_list event: the binlog's state before the file.
func gtidList(raw []byte, crc bool) *binlogState {
	b := eventBody(raw, crc)
	st := &binlogState{}
	if len(b) < 4 {
		return st
	}
	n := int(binary.LittleEndian.Uint32(b) & 0x0fffffff)
	for i := 0; i < n && 4+16*(i+1) <= len(b); i++ {
		e := b[4+16*i:]
		st.update(gtid{binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint64(e[8:])})
	}
	return st
}

// missing names what a replica at want lacks that the binlog no longer
// holds, given the state before the binlog's first file; "" when nothing.
func missing(want gtidState, before *binlogState) string {
	for d, seq := range before.last() {
		if seq > want[d].seq {
			return fmt.Sprintf("domain %d: the served binlog starts after %d-?-%d, the replica is at %d", d, d, seq, want[d].seq)
		}
	}
	return ""
}

// hasAll reports whether a replica at want has every transaction before a
// file whose Gtid_list is before: a dump can start at that file.
func hasAll(want gtidState, before *binlogState) bool {
	for d, seq := range before.last() {
		g, ok := want[d]
		if !ok || g.seq < seq {
			return false
		}
	}
	return true
}

// fakeGtidList is the artificial Gtid_list a primary sends once a GTID
// dump reaches the replica's position (sql_repl.cc send_fake_gtid_list):
// the binlog state there, so that MASTER_GTID_WAIT works on the replica.
func fakeGtidList(serverID uint32, st *binlogState, logPos uint32, crc bool) []byte {
	return buildEvent(replication.MARIADB_GTID_LIST_EVENT, serverID, 0, logPos, replication.LOG_EVENT_ARTIFICIAL_F, st.body(), crc)
}
