package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// checkDiverged refuses a GTID replica whose GTID the served binlog does
// not hold although its domain has reached that sequence number: the
// binlog has no GTID of the replica's server id in the domain at or past
// the replica's sequence number. MariaDB's check_slave_start_position
// refuses it (ER_GTID_POSITION_NOT_FOUND_IN_BINLOG2, sent as 1236 so that
// the replica does not reconnect): the replica applied transactions the
// primary never had (it diverged), and served by sequence number it would
// silently keep them and miss the primary's of the same numbers.
//
// A replica ahead of the binlog in the domain is checkAhead's; a domain
// the binlog has never seen is accepted, as MariaDB accepts it.
func (h *session) checkDiverged(want gtidState) (empty map[uint32]bool, err error) {
	pos, err := h.s.log.GTIDPos()
	if err != nil {
		return nil, errDump("cannot read the GTID position at the relay's end: %v (fix: check the task's relay directory)", err)
	}
	have, err := parseState(pos)
	if err != nil {
		return nil, errDump("the relay's GTID position %q: %v", pos, err)
	}
	// The common case needs no scan: the domain's last GTID is of the
	// replica's server id and at or past its sequence number.
	var doubt []gtid
	for d, w := range want {
		last, ok := have[d]
		switch {
		case !ok:
			// MariaDB's START_ON_EMPTY_DOMAIN: checked again at the
			// domain's first GTID (gtidFilter).
			if empty == nil {
				empty = map[uint32]bool{}
			}
			empty[d] = true
		case w.seq <= last.seq && w.server != last.server:
			doubt = append(doubt, w)
		}
	}
	if len(doubt) == 0 {
		return empty, nil
	}
	st, err := h.binlogStateAtEnd()
	if err != nil {
		return nil, errDump("cannot read the served binlog's GTID state: %v (fix: check the task's relay directory)", err)
	}
	for _, w := range doubt {
		if seq, ok := st.find(w.domain, w.server); ok && seq >= w.seq {
			continue
		}
		return nil, startMissing(w, have[w.domain], pos)
	}
	return empty, nil
}

// startMissing is the error for a replica's GTID w that the binlog lacks,
// given the last GTID of w's domain, as give_error_start_pos_missing_in_binlog
// chooses it and mysql_binlog_send words it; at is the served binlog's
// position, for the fix. A replica truncates the text to about 430 bytes
// (MYSQL_ERRMSG_SIZE less its own prefix), so the fix stays short.
func startMissing(w, last gtid, at string) error {
	if last.seq < w.seq {
		return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf(
			"Error: connecting slave requested to start from GTID %d-%d-%d, which is not in the master's binlog "+
				"(the served binlog is at %s; fix: point the replica at the server that has its GTID, or rebuild it from a copy of the source)",
			w.domain, w.server, w.seq, at))
	}
	return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf(
		"Error: connecting slave requested to start from GTID %d-%d-%d, which is not in the master's binlog. "+
			"Since the master's binlog contains GTIDs with higher sequence numbers, it probably means that the slave has "+
			"diverged due to executing extra erroneous transactions "+
			"(fix: rebuild the replica from a copy of the source, or set its gtid_slave_pos to the source's GTID at its data's point)",
		w.domain, w.server, w.seq))
}

// startHole is the error for a replica in GTID strict mode whose GTID
// falls in a gap of its server id's sequence numbers (ER_GTID_START_FROM_BINLOG_HOLE).
func startHole(w gtid) error {
	return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf(
		"The binlog on the master is missing the GTID %d-%d-%d requested by the slave (even though both a prior and a "+
			"subsequent sequence number does exist), and GTID strict mode is enabled "+
			"(fix: set the replica's gtid_slave_pos to a GTID the source logged, after checking which transactions it has)",
		w.domain, w.server, w.seq))
}

// reachGTID applies MariaDB's rule for a GTID group in a domain where the
// replica's position w is not yet reached (send_event_to_slave): a group
// is skipped unless it is of w's server id and past w's sequence number;
// the first of w's server id at or past it reaches the position, and one
// past it, for a replica in GTID strict mode, means w is a hole in the
// binlog. A domain the binlog had not seen at connect (empty) is checked
// again at its first GTID, with the state that includes it.
func (d *dumper) reachGTID(g, w gtid) (skip, reached bool, err error) {
	if d.empty[g.domain] {
		delete(d.empty, g.domain)
		if seq, ok := d.state.find(w.domain, w.server); !ok || seq < w.seq {
			return false, false, startMissing(w, g, fmt.Sprintf("%d-%d-%d", g.domain, g.server, g.seq))
		}
	}
	skip = g.server != w.server || g.seq <= w.seq
	if g.server == w.server && g.seq >= w.seq {
		if d.strict && g.seq > w.seq {
			return false, false, startHole(w)
		}
		reached = true
	}
	return skip, reached, nil
}

// find returns the last sequence number of a domain and server id.
func (b *binlogState) find(domain, server uint32) (uint64, bool) {
	for _, g := range b.list {
		if g.domain == domain && g.server == server {
			return g.seq, true
		}
	}
	return 0, false
}

// binlogStateAtEnd is the served binlog's GTID state at its end, every
// domain and server id as MariaDB's rpl_binlog_state holds it: the
// Gtid_list at the head of the last file (a primary's carries the whole
// state, of purged files too) updated by the GTIDs in that file.
func (h *session) binlogStateAtEnd() (*binlogState, error) {
	end := h.s.log.End()
	if end.File == "" {
		return &binlogState{}, nil
	}
	size := h.s.log.Size(end.File)
	at := sluice.Position{File: end.File, Pos: 4}
	if files := h.s.log.Files(); len(files) > 0 && files[0] == end.File {
		at = sluice.Position{} // the relay's head: its first file may start mid-file, after a Gtid_list
	}
	r, err := h.s.log.Open(at)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := &binlogState{}
	crc := false
	for !caughtUp(r, end, size) {
		ev, err := r.Next(ctx)
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case replication.FORMAT_DESCRIPTION_EVENT:
			crc = fdeChecksum(ev.Data)
		case replication.MARIADB_GTID_LIST_EVENT:
			if len(st.list) == 0 {
				st = gtidList(ev.Data, crc)
			}
		case replication.MARIADB_GTID_EVENT:
			if g, ok := gtidOf(ev.Data, crc); ok {
				st.update(g)
			}
		}
	}
	return st, nil
}
