package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// checkAhead refuses a GTID replica whose position is past the served
// binlog in a domain the binlog holds, as MariaDB's
// check_slave_start_position does (ER_GTID_POSITION_NOT_FOUND_IN_BINLOG,
// sent as 1236 so that the replica does not reconnect). Accepted, such a
// replica waits in silence for sequence numbers it already has, and after
// a failover or a lost relay it would skip every transaction up to them.
// A domain the binlog has never seen is accepted, as MariaDB accepts it
// (another primary may serve that domain).
//
// The one difference from a primary: the relay trails its source. When the
// service can ask the source (Config.Source) and the source has the
// replica's GTID, the dump waits for the relay to fetch it, up to
// Source.CatchUp, before it refuses.
func (h *session) checkAhead(want gtidState) error {
	var deadline time.Time
	for {
		pos, err := h.s.log.GTIDPos()
		if err != nil {
			return errDump("cannot read the GTID position at the relay's end: %v (fix: check the task's relay directory)", err)
		}
		have, err := parseState(pos)
		if err != nil {
			return errDump("the relay's GTID position %q: %v", pos, err)
		}
		g, ahead := firstAhead(want, have)
		if !ahead {
			return nil
		}
		if deadline.IsZero() && h.sourceHas(g) {
			wait := h.s.cfg.Source.CatchUp
			if wait <= 0 {
				wait = time.Minute
			}
			deadline = time.Now().Add(wait)
		}
		if deadline.IsZero() || time.Now().After(deadline) {
			return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf(
				"Error: connecting slave requested to start from GTID %d-%d-%d, which is not in the master's binlog "+
					"(the served binlog ends at %s; fix: point the replica at the server that has its GTID, or, if the replica's data is to be thrown away, "+
					"rebuild it from a copy of the source and set gtid_slave_pos to that copy's position)", g.domain, g.server, g.seq, pos))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstAhead returns a GTID of want past have's last sequence number in a
// domain that have holds.
func firstAhead(want, have gtidState) (gtid, bool) {
	for d, g := range want {
		if last, ok := have[d]; ok && g.seq > last.seq {
			return g, true
		}
	}
	return gtid{}, false
}

// sourceHas reports whether the source's binlog holds g's sequence number
// in g's domain (false when the service cannot ask the source).
func (h *session) sourceHas(g gtid) bool {
	if h.s.cfg.Source == nil || h.s.cfg.Source.Dial == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.s.cfg.Source.Dial(ctx)
	if err != nil {
		return false
	}
	defer c.Close()
	r, err := c.Execute("SELECT @@gtid_binlog_pos")
	if err != nil || len(r.RowDatas) == 0 {
		return false
	}
	pos, _ := r.GetString(0, 0)
	st, err := parseState(pos)
	if err != nil {
		return false
	}
	last, ok := st[g.domain]
	return ok && last.seq >= g.seq
}
