package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// COM_BINLOG_DUMP flags.
const (
	dumpNonBlock     = 0x01 // stop at the end (mariadb-binlog without --stop-never)
	dumpSendAnnotate = 0x02 // Annotate_rows events wanted
)

// errDump is ERR 1236, which a replica shows in Last_IO_Error.
// Its text may quote what the client sent (a file name): control bytes
// are shown escaped, never sent raw into a replica's error column or a log.
func errDump(format string, a ...any) error {
	return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, printable(fmt.Sprintf(format, a...)))
}

// printable escapes the control bytes and invalid UTF-8 of s as \xNN.
func printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			fmt.Fprintf(&b, "\\x%02x", s[i])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dumpRequest is what a dump command asks for.
type dumpRequest struct {
	name      string
	pos       uint32
	flags     uint16
	replicaID uint32
	// mysqlWant: COM_BINLOG_DUMP_GTID's GTID set (MySQL auto-position).
	mysqlWant *mysql.MysqlGTIDSet
}

// dump streams the relay from the requested file and position
// (COM_BINLOG_DUMP).
func (h *session) dump(data []byte) error {
	if len(data) < 10 {
		return mysql.NewError(mysql.ER_MALFORMED_PACKET, "COM_BINLOG_DUMP too short")
	}
	// MariaDB reads the file name as a C string (thd->strdup(packet + 10)):
	// it ends at the first NUL. python-mysql-replication sends four NULs
	// for "from the first file".
	name := data[10:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return h.stream(dumpRequest{pos: binary.LittleEndian.Uint32(data[0:]), flags: binary.LittleEndian.Uint16(data[4:]),
		replicaID: binary.LittleEndian.Uint32(data[6:]), name: string(name)})
}

// stream sends the relay to a dump from where req says.
func (h *session) stream(req dumpRequest) error {
	name, pos, flags, replicaID := req.name, req.pos, req.flags, req.replicaID
	if replicaID != 0 && replicaID == h.s.cfg.ServerID {
		return errDump("the replica's server_id %d is the binlog service's own (fix: give the replica or serve.server-id another server_id)", replicaID)
	}
	files := h.s.log.Files()
	if len(files) == 0 {
		return errDump("the relay log is empty (fix: wait until sluice has fetched events from the source)")
	}
	// A MariaDB replica in GTID mode sets @slave_connect_state (empty
	// when it has no GTIDs yet) and the file and position mean nothing.
	var want gtidState
	var empty map[uint32]bool // GTID mode: the replica's domains the binlog had not seen
	strict := false           // GTID mode: the replica runs with gtid_strict_mode
	if st, ok := h.vars["slave_connect_state"]; ok && req.mysqlWant == nil {
		var err error
		if want, err = parseState(st); err != nil {
			return mysql.NewError(1948, fmt.Sprintf("Could not parse GTID list %q: %v (fix: SET GLOBAL gtid_slave_pos to a valid position on the replica)", st, err))
		}
		name, pos = files[0], 4
		if err := h.checkAhead(want); err != nil {
			return err
		}
		if empty, err = h.checkDiverged(want); err != nil {
			return err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(h.vars["slave_gtid_strict_mode"]), 10, 64)
		strict = err == nil && n != 0
	}
	if name == "" {
		name, pos = files[0], 4
	}
	if pos < 4 {
		pos = 4
	}
	at := sluice.Position{File: name, Pos: pos}
	switch {
	case want != nil:
		at, name = h.gtidStart(files, replication.MARIADB_GTID_LIST_EVENT, func(raw []byte, crc bool) bool { return hasAll(want, gtidList(raw, crc)) })
		pos = 4
	case req.mysqlWant != nil:
		at, name = h.gtidStart(files, replication.PREVIOUS_GTIDS_EVENT, func(raw []byte, crc bool) bool {
			prev, err := previousGTIDs(raw, crc)
			return err == nil && req.mysqlWant.Contain(prev)
		})
		pos = 4
	case !h.s.log.Has(at):
		return errDump("could not find %s:%d in the relay log, which holds %s to %s (fix: start the replica at a position the relay holds; SHOW BINARY LOGS lists them)",
			name, pos, files[0], files[len(files)-1])
	}
	r, err := h.s.log.Open(at)
	if err != nil {
		return errDump("%v (fix: start the replica at an event boundary the relay holds)", err)
	}
	defer r.Close()
	// A client that set @master_binlog_checksum, to any value (mariadb-binlog
	// sets 'NONE'), knows checksums and gets the events as they are, as
	// MariaDB 10.11 sends them; only one that never set it gets them
	// without (sql_repl.cc is_slave_checksum_aware).
	// The events the service makes up (Rotate, heartbeat, Gtid_list) carry
	// a checksum only if the client asked for CRC32: go-mysql and
	// mariadb-binlog set 'NONE' and cannot strip one from the first
	// Rotate, which comes before any format description event
	// (get_binlog_checksum_value_at_connect).
	sum, aware := h.vars["master_binlog_checksum"]
	fakeCRC := aware && strings.EqualFold(strings.TrimSpace(sum), "CRC32")
	fde, err := h.s.log.FDE(name)
	if err != nil {
		return errDump("%v", err)
	}
	fileCRC := fdeChecksum(fde)
	d := &dumper{h: h, aware: aware, fakeCRC: fakeCRC, fileCRC: fileCRC, file: name, pos: pos, annotate: flags&dumpSendAnnotate != 0, want: want, empty: empty, strict: strict, mysqlWant: req.mysqlWant}
	var done func()
	d.stat, done = h.s.newDumpStat(h, replicaID, sluice.Position{File: name, Pos: pos})
	defer done()
	defer d.publishStats()
	// The socket is taken here: once the dump returns, go-mysql may set
	// the connection's fields to nil while the hang-up watch below still
	// reads.
	nc := h.conn.Conn.Conn
	// Events go out through a write buffer, flushed when it fills and
	// whenever the dump has sent all the served binlog holds (before it
	// waits): a write per event cost a syscall each, and a consumer
	// catching up got a third of MariaDB's rate (bench-cdc).
	bw := bufio.NewWriterSize(nc, 256<<10)
	h.conn.Conn.Conn = bufferedConn{nc, bw}
	d.bw = bw
	defer func() {
		_ = bw.Flush()
		h.conn.Conn.Conn = nc
	}()
	if err := d.send(artificialRotate(h.s.cfg.ServerID, name, uint64(pos), fakeCRC)); err != nil {
		return err
	}
	if pos > 4 {
		if err := d.send(d.strip(servedFDE(fde, true, fileCRC))); err != nil {
			return err
		}
		d.fakeCRC = aware && fileCRC
	}
	period := time.Duration(0)
	if ns, err := strconv.ParseInt(h.vars["master_heartbeat_period"], 10, 64); err == nil && ns > 0 {
		period = time.Duration(ns)
	}
	// The client sends nothing during a dump: a read that returns means it
	// hung up (or the server closed the connection), and the dump, which
	// may be waiting for new data, ends at once instead of at its next write.
	dctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		var b [1]byte
		_, _ = nc.Read(b[:])
		stop()
	}()
	// end is the served binlog's end as last asked: while the dump is
	// behind it, the next event is there to read, and the reader gets no
	// heartbeat timer (a timer per event was a third of the dump's CPU
	// while catching up, bench-cdc); only a dump that has reached it
	// flushes and asks again, and waits if nothing more is there.
	end := h.s.log.End()
	endSize := h.s.log.Size(end.File)
	for {
		atEnd := caughtUp(r, end, endSize)
		if atEnd {
			// Everything known when the end was last asked is in the
			// buffer: it goes out now, before asking again. Flushing only
			// once nothing more had been published let a dump that found
			// new data at every ask (a live source under load) hold its
			// events until 256 KiB had gathered: over 100 ms at 2 MB/s,
			// the tail of bench-cdc's served DT.
			if bw.Buffered() > 0 {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
			d.publishStats()
			end = h.s.log.End()
			endSize = h.s.log.Size(end.File)
			atEnd = caughtUp(r, end, endSize)
		}
		if flags&dumpNonBlock != 0 && atEnd {
			// The end: EOF, as a primary ends a non-blocking dump.
			_ = h.conn.WritePacket([]byte{0, 0, 0, 0, 0xfe, 0, 0, 2, 0})
			_ = bw.Flush()
			h.conn.Close()
			return nil
		}
		ctx, cancel := dctx, context.CancelFunc(func() {})
		if atEnd && period > 0 {
			ctx, cancel = context.WithTimeout(dctx, period)
		}
		ev, err := r.Next(ctx)
		cancel()
		if dctx.Err() != nil {
			h.conn.Close()
			return nil // the client went away
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if err := d.send(heartbeat(h.s.cfg.ServerID, d.file, d.pos, d.fakeCRC)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			d.fail(errDump("reading the relay log: %v (fix: see sluice's log; the replica reconnects)", err))
			return nil
		}
		if err := d.event(ev); err != nil {
			return err
		}
	}
}

// dumper sends one dump's events.
type dumper struct {
	h        *session
	want     gtidState       // GTID mode: the replica's position in the domains not yet reached; nil by position
	empty    map[uint32]bool // GTID mode: domains of want the binlog had not seen at connect (checked at their first GTID)
	strict   bool            // GTID mode: the replica set @slave_gtid_strict_mode
	state    *binlogState    // GTID mode: the binlog's state after the last event read
	sendFake bool            // GTID mode: a domain was reached; the fake Gtid_list follows its group
	headSeen bool            // GTID mode: the first file's Gtid_list (Previous_gtids) was checked
	// mysqlWant: MySQL GTID mode, the replica's executed set; nil otherwise.
	mysqlWant *mysql.MysqlGTIDSet
	skipping  bool // inside a group the replica already has
	aware     bool // the replica gets the files' checksums (it set @master_binlog_checksum)
	fakeCRC   bool // the events the service makes up carry one
	fileCRC   bool // the current file's events carry them
	annotate  bool
	file      string
	pos       uint32 // the position after the last event sent
	stat      *dumpStat
	pend      pendingStats  // sent but not yet in stat (publishStats)
	hdr       [5]byte       // send's packet header (hdr[4] stays 0), kept here so it does not escape per event
	bw        *bufio.Writer // the connection's write buffer
}

func (d *dumper) event(ev Event) error {
	if ev.Pos.File != d.file {
		// A new file: the artificial Rotate first, as a primary sends it.
		d.file = ev.Pos.File
		if err := d.send(artificialRotate(d.h.s.cfg.ServerID, d.file, 4, d.fakeCRC)); err != nil {
			return err
		}
	}
	d.pos = ev.Pos.Pos
	raw := ev.Data
	if d.mysqlWant != nil {
		send, err := d.mysqlFilter(ev)
		if err != nil || !send {
			return err
		}
	}
	if d.want != nil {
		send, err := d.gtidFilter(ev)
		if err != nil {
			return err
		}
		if !send {
			return d.fakeAfter(ev)
		}
	}
	switch ev.Type {
	case replication.FORMAT_DESCRIPTION_EVENT:
		d.fileCRC = fdeChecksum(raw)
		raw = servedFDE(raw, false, d.fileCRC)
		// From a file's format description event on, a primary's own
		// events follow that file's checksum algorithm.
		d.fakeCRC = d.aware && d.fileCRC
	case replication.MARIADB_ANNOTATE_ROWS_EVENT:
		if !d.annotate {
			return nil // the replica did not ask for them; it tolerates the gap in positions
		}
	}
	raw = d.strip(raw)
	if err := d.send(raw); err != nil {
		return err
	}
	d.sent(raw, ev.Pos, isTxnEnd(ev))
	return d.fakeAfter(ev)
}

// fakeAfter sends the fake Gtid_list once the group in which the replica's
// position was reached has ended (sent or skipped).
func (d *dumper) fakeAfter(ev Event) error {
	if !d.sendFake || d.skipping || d.state == nil {
		return nil
	}
	d.sendFake = false
	return d.send(fakeGtidList(d.h.s.cfg.ServerID, d.state, ev.Pos.Pos, d.fakeCRC))
}

// strip removes an event's checksum for a replica that takes none.
func (d *dumper) strip(raw []byte) []byte {
	if d.aware || !d.fileCRC || len(raw) < headerSize+4 {
		return raw
	}
	out := append([]byte(nil), raw[:len(raw)-4]...)
	binary.LittleEndian.PutUint32(out[9:], uint32(len(out)))
	if replication.EventType(out[4]) == replication.FORMAT_DESCRIPTION_EVENT {
		// The FDE tells the reader whether events carry checksums: now
		// they do not (its algorithm byte ends the body).
		out[len(out)-1] = byte(replication.BINLOG_CHECKSUM_ALG_OFF)
	}
	return out
}

// send writes one event packet, 0x00 then the event, into the write
// buffer, framed as go-mysql's WritePacket frames it (payloads of 16 MiB
// and more split into packets of 0xffffff bytes, the last shorter, maybe
// empty) but without copying the event into a packet first.
func (d *dumper) send(ev []byte) error {
	c := d.h.conn.Conn
	if c.Compression != mysql.MYSQL_COMPRESS_NONE {
		buf := make([]byte, 5+len(ev))
		copy(buf[5:], ev)
		return c.WritePacket(buf)
	}
	length := 1 + len(ev)
	hdr := &d.hdr
	first := true
	for {
		n := min(length, mysql.MaxPayloadLen)
		hdr[0], hdr[1], hdr[2], hdr[3] = byte(n), byte(n>>8), byte(n>>16), c.Sequence
		c.Sequence++
		body := n
		h := hdr[:4]
		if first {
			h, body, first = hdr[:5], n-1, false // hdr[4] is the 0x00 before the event
		}
		if _, err := d.bw.Write(h); err != nil {
			return err
		}
		if _, err := d.bw.Write(ev[:body]); err != nil {
			return err
		}
		ev, length = ev[body:], length-n
		if n < mysql.MaxPayloadLen {
			return nil
		}
	}
}

// fail ends a dump in progress with an ERR packet the replica can read,
// and closes the connection.
func (d *dumper) fail(err error) {
	var me *mysql.MyError
	if errors.As(err, &me) {
		msg := []byte{0, 0, 0, 0, 0xff}
		msg = binary.LittleEndian.AppendUint16(msg, me.Code)
		msg = append(msg, '#')
		msg = append(msg, "HY000"...)
		msg = append(msg, me.Message...)
		_ = d.h.conn.WritePacket(msg)
	}
	_ = d.bw.Flush()
	d.h.conn.Close()
}

// bufferedConn is a connection whose writes go through w (the dump's
// buffer); reads and everything else are the connection's.
type bufferedConn struct {
	net.Conn
	w *bufio.Writer
}

func (c bufferedConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// gtidFilter decides, in GTID mode, whether an event goes to the replica,
// as sql_repl.cc does: whole groups whose GTID the replica has (sequence
// number at or below its state for the group's domain, until that domain
// reaches it; reachGTID) are skipped; the first file's Gtid_list is
// checked against the replica's state, so that a replica that needs
// transactions from before the served binlog gets ERR 1236 rather than
// silently missing them.
func (d *dumper) gtidFilter(ev Event) (bool, error) {
	switch ev.Type {
	case replication.MARIADB_GTID_LIST_EVENT:
		d.state = gtidList(ev.Data, d.fileCRC)
		if !d.headSeen {
			d.headSeen = true
			if m := missing(d.want, d.state); m != "" {
				err := errDump("Could not find GTID state requested by slave in any binlog files (%s; fix: start the replica from a GTID position the service holds, or start the service earlier)", m)
				d.fail(err)
				return false, err
			}
			// A replica whose GTID is the last of its domain before this
			// file has reached its position here (gtid_find_binlog_file).
			last := d.state.last()
			for _, g := range d.state.list {
				if w, ok := d.want[g.domain]; ok && w == g && g.seq == last[g.domain] {
					delete(d.want, g.domain)
					d.sendFake = true
				}
			}
		}
		return true, nil
	case replication.MARIADB_GTID_EVENT:
		g, ok := gtidOf(ev.Data, d.fileCRC)
		if !ok {
			return true, nil
		}
		if d.state == nil {
			d.state = &binlogState{}
		}
		d.state.update(g)
		if w, has := d.want[g.domain]; has {
			skip, reached, err := d.reachGTID(g, w)
			if err != nil {
				d.fail(err)
				return false, err
			}
			d.skipping = skip
			if reached {
				// Later groups of this domain all go, and the fake
				// Gtid_list follows this group.
				delete(d.want, g.domain)
				d.sendFake = true
			}
		}
		if d.skipping && ev.Boundary {
			d.skipping = false
			return false, nil
		}
		return !d.skipping, nil
	}
	if d.skipping {
		if ev.Boundary {
			d.skipping = false
		}
		return false, nil
	}
	return true, nil
}

// gtidStart is where a GTID dump begins: the newest file before which the
// replica has every transaction (has says so of the file's head event of
// type head: its Gtid_list or Previous_gtids), else the relay's first
// file.
func (h *session) gtidStart(files []string, head replication.EventType, has func(raw []byte, crc bool) bool) (sluice.Position, string) {
	for i := len(files) - 1; i > 0; i-- {
		at := sluice.Position{File: files[i], Pos: 4}
		if raw, crc, err := h.headEvent(at, head); err == nil && has(raw, crc) {
			return at, files[i]
		}
	}
	return sluice.Position{}, files[0] // the first file from its start, the relay's head included
}

// headEvent reads the event of type typ at a file's head, and whether the
// file's events carry checksums.
func (h *session) headEvent(at sluice.Position, typ replication.EventType) ([]byte, bool, error) {
	r, err := h.s.log.Open(at)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	crc := false
	for i := 0; i < 4; i++ {
		ev, err := r.Next(ctx)
		if err != nil {
			return nil, false, err
		}
		switch ev.Type {
		case replication.FORMAT_DESCRIPTION_EVENT:
			crc = fdeChecksum(ev.Data)
		case typ:
			return ev.Data, crc, nil
		}
	}
	return nil, false, fmt.Errorf("no %s at the head of %s", typ, at.File)
}
