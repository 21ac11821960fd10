package merge_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/merge"
)

// Synthetic MariaDB binlog events, byte for byte as a MariaDB 10.11
// primary writes them (with CRC32), for sources that the test controls.

const hdr = replication.EventHeaderSize

func ev(typ replication.EventType, serverID, ts uint32, flags uint16, body []byte, at int64, crc bool) []byte {
	size := hdr + len(body)
	if crc {
		size += 4
	}
	raw := make([]byte, hdr, size)
	binary.LittleEndian.PutUint32(raw[0:], ts)
	raw[4] = byte(typ)
	binary.LittleEndian.PutUint32(raw[5:], serverID)
	binary.LittleEndian.PutUint32(raw[9:], uint32(size))
	binary.LittleEndian.PutUint32(raw[13:], uint32(at)+uint32(size))
	binary.LittleEndian.PutUint16(raw[17:], flags)
	raw = append(raw, body...)
	if crc {
		raw = binary.LittleEndian.AppendUint32(raw, crc32.ChecksumIEEE(raw))
	}
	return raw
}

// fdeBody: binlog v4, a MariaDB version, the post-header lengths that
// matter here (table map and v1 rows events: 8, a 6-byte table id) and
// the checksum algorithm.
func fdeBody(crc bool) []byte {
	b := binary.LittleEndian.AppendUint16(nil, 4)
	var ver [50]byte
	copy(ver[:], "10.11.6-MariaDB-log")
	b = append(b, ver[:]...)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, hdr)
	ph := make([]byte, 170)
	ph[replication.QUERY_EVENT-1] = 13
	ph[replication.TABLE_MAP_EVENT-1] = 8
	for _, t := range []replication.EventType{replication.WRITE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv1} {
		ph[t-1] = 8
	}
	ph[replication.MARIADB_GTID_EVENT-1] = 19
	b = append(b, ph...)
	if crc {
		return append(b, byte(replication.BINLOG_CHECKSUM_ALG_CRC32))
	}
	return append(b, byte(replication.BINLOG_CHECKSUM_ALG_OFF))
}

// synthTxn is one transaction of a synthetic source.
type synthTxn struct {
	ts    uint32
	seq   uint64
	ddl   bool
	rows  []int32 // one rows event per value, alternating between two tables
	first int     // index of its first event in the source's stream
	last  int
}

// synthSource is a source's relay as the merge reads it: a stream of
// events that the test publishes bit by bit, and what the relay "heard".
type synthSource struct {
	name     string
	serverID uint32
	domain   uint32 // native
	crc      bool
	fde      []byte
	events   []merge.Event
	txns     []synthTxn

	mu    sync.Mutex
	avail int // events published
	ch    chan struct{}
}

func newSynthSource(rng *rand.Rand, idx int, base uint32) *synthSource {
	s := &synthSource{name: fmt.Sprintf("s%d", idx), serverID: uint32(100 + idx), domain: 0, crc: rng.Intn(4) != 0, ch: make(chan struct{})}
	file := "src-bin.000001"
	var off int64 = 4
	add := func(raw []byte, boundary bool) {
		off += int64(len(raw))
		s.events = append(s.events, merge.Event{Data: raw, Pos: sluice.Position{File: file, Pos: uint32(off), Flavor: "mariadb"}, Boundary: boundary})
	}
	s.fde = ev(replication.FORMAT_DESCRIPTION_EVENT, s.serverID, base, 0, fdeBody(s.crc), off, true)
	add(s.fde, true)
	add(ev(replication.MARIADB_GTID_LIST_EVENT, s.serverID, base, 0, binary.LittleEndian.AppendUint32(nil, 0), off, s.crc), true)
	ts := base
	n := 20 + rng.Intn(120)
	db := fmt.Sprintf("db%d", idx)
	for i := 0; i < n; i++ {
		ts += uint32(rng.Intn(3))
		t := synthTxn{ts: ts, seq: uint64(i + 1), first: len(s.events)}
		gb := binary.LittleEndian.AppendUint64(nil, t.seq)
		gb = binary.LittleEndian.AppendUint32(gb, s.domain)
		if rng.Intn(10) == 0 {
			t.ddl = true
			add(ev(replication.MARIADB_GTID_EVENT, s.serverID, ts, 0, append(gb, 1), off, s.crc), false)
			add(ev(replication.QUERY_EVENT, s.serverID, ts, 0, queryBody(db, fmt.Sprintf("CREATE TABLE t%d (a int)", i)), off, s.crc), true)
		} else {
			add(ev(replication.MARIADB_GTID_EVENT, s.serverID, ts, 0, append(gb, 0), off, s.crc), false)
			add(ev(replication.QUERY_EVENT, s.serverID, ts, 0, queryBody(db, "BEGIN"), off, s.crc), false)
			// The source's own table ids: the same numbers in every source,
			// which the merge must tell apart.
			for k := 0; k < 1+rng.Intn(3); k++ {
				tid := uint64(70 + k%2)
				v := int32(rng.Intn(1 << 30))
				t.rows = append(t.rows, v)
				add(ev(replication.TABLE_MAP_EVENT, s.serverID, ts, 0, tableMapBody(tid, db, fmt.Sprintf("t%d", k%2)), off, s.crc), false)
				add(ev(replication.WRITE_ROWS_EVENTv1, s.serverID, ts, 0, rowsBody(tid, v), off, s.crc), false)
			}
			add(ev(replication.XID_EVENT, s.serverID, ts, 0, binary.LittleEndian.AppendUint64(nil, uint64(i)), off, s.crc), true)
		}
		t.last = len(s.events) - 1
		s.txns = append(s.txns, t)
	}
	return s
}

func queryBody(db, q string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 1) // thread id
	b = binary.LittleEndian.AppendUint32(b, 0)    // exec time
	b = append(b, byte(len(db)))
	b = binary.LittleEndian.AppendUint16(b, 0) // error code
	b = binary.LittleEndian.AppendUint16(b, 0) // status vars
	b = append(b, db...)
	b = append(b, 0)
	return append(b, q...)
}

func tableMapBody(id uint64, db, table string) []byte {
	b := make([]byte, 6)
	for i := range b {
		b[i] = byte(id >> (8 * i))
	}
	b = append(b, 1, 0) // flags
	b = append(b, byte(len(db)))
	b = append(b, db...)
	b = append(b, 0, byte(len(table)))
	b = append(b, table...)
	b = append(b, 0)
	b = append(b, 1, 3) // one INT column
	b = append(b, 0)    // no metadata
	return append(b, 0) // nullable bitmap
}

func rowsBody(id uint64, v int32) []byte {
	b := make([]byte, 6)
	for i := range b {
		b[i] = byte(id >> (8 * i))
	}
	b = append(b, 1, 0)    // flags: STMT_END_F
	b = append(b, 1, 0x01) // one column, present
	b = append(b, 0)       // null bitmap
	return binary.LittleEndian.AppendUint32(b, uint32(v))
}

// publish makes n more events visible (whole transactions only, as a
// relay publishes them).
func (s *synthSource) publishTxns(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; n > 0 && s.avail < len(s.events); n-- {
		for s.avail < len(s.events) {
			s.avail++
			if s.events[s.avail-1].Boundary {
				break
			}
		}
	}
	close(s.ch)
	s.ch = make(chan struct{})
}

func (s *synthSource) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.avail == len(s.events)
}

// heard: the relay holds everything published, and the source will send
// nothing older than its next transaction (a truthful heartbeat).
func (s *synthSource) heard() (sluice.Position, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.avail == 0 {
		return sluice.Position{}, time.Time{}
	}
	next := time.Unix(4_000_000_000, 0) // nothing more: a time past every timestamp
	for _, t := range s.txns {
		if t.first >= s.avail {
			next = time.Unix(int64(t.ts), 0)
			break
		}
	}
	return s.events[s.avail-1].Pos, next
}

func (s *synthSource) open(start sluice.Position) (merge.Input, error) {
	i := 0
	if start.File != "" {
		for i < len(s.events) && s.events[i].Pos.Pos <= start.Pos {
			i++
		}
		if i == 0 || s.events[i-1].Pos.Pos != start.Pos || !s.events[i-1].Boundary {
			return nil, fmt.Errorf("%s: %s is not a boundary", s.name, start)
		}
	}
	return &synthInput{s: s, i: i}, nil
}

type synthInput struct {
	s *synthSource
	i int
}

func (in *synthInput) Next(ctx context.Context) (merge.Event, error) {
	for {
		in.s.mu.Lock()
		avail, ch := in.s.avail, in.s.ch
		in.s.mu.Unlock()
		if in.i < avail {
			e := in.s.events[in.i]
			e.Data = append([]byte(nil), e.Data...)
			in.i++
			return e, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return merge.Event{}, ctx.Err()
		}
	}
}

func (in *synthInput) FDE(string) ([]byte, error) { return in.s.fde, nil }
func (in *synthInput) Close() error               { return nil }
