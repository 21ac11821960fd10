package decode

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// Two-phase XA in the binlog, as MariaDB 10.11 writes it (seen with
// mariadb-binlog on a sandbox; the same shapes come from sluice's own dtx
// XA mode):
//
//	prepare group:    GTID (flags2 FL_PREPARED_XA, carries the XID)
//	                  Table_map / row events ...
//	                  Query "XA END X'..',X'..',N"
//	                  XA_PREPARE_LOG_EVENT (type 38, one_phase=0)
//	completion group: GTID (FL_COMPLETED_XA|FL_STANDALONE, carries the XID)
//	                  Query "XA COMMIT X'..',X'..',N" or "XA ROLLBACK ..."
//
// The completion group may come from another session, long after the
// prepare, with any number of other transactions between the two. An XA
// that changed nothing, or was rolled back before PREPARE, writes nothing;
// XA COMMIT ... ONE PHASE is written as an ordinary transaction
// (START TRANSACTION ... Xid). Changes to non-transactional tables made
// inside an XA transaction are written as their own ordinary transactions.
//
// MySQL writes the XA START as a Query event after its GTID event, ends a
// one-phase commit with Query "XA COMMIT ... ONE PHASE" (or an
// XA_PREPARE_LOG_EVENT with one_phase=1), and otherwise the same groups.
//
// A native replica (MariaDB 10.5+, MDEV-742) runs the prepare
// group as XA START ... XA END; XA PREPARE on itself, so the rows are held
// invisible and locked, and XA COMMIT / XA ROLLBACK complete them at the
// completion group's place in the source order. The decoder emits the same
// meaning: the prepare group is Begin (with the XID), Rows..., XAPrepare;
// the completion group is one XACommit or XARollback item. The applier
// holds the prepared rows (apply/xa.go) and applies them at XACommit.
// Applying them at the commit point, not the prepare point, gives the
// source's result: the source's prepared transaction holds its row locks
// until it completes, so no transaction between the two groups touched its
// rows.

// GTID flags2 bits of MariaDB's Gtid_log_event (log_event.h) that go-mysql
// v1.16.0 does not name, and does not parse the XID behind.
const (
	mariaFlGroupCommitID = 2
	mariaFlPreparedXA    = 64
	mariaFlCompletedXA   = 128
)

// xaState is the decoder's view of the XA group being read.
type xaState struct {
	// xid is the XID of the open prepare group ("" when the open group is
	// not one), in the canonical form of formatXID.
	xid string
	// completing: the current group is a MariaDB XA completion group,
	// which ends with its XA COMMIT / XA ROLLBACK statement.
	completing bool
	// completeXID is the completion group's XID from its GTID event.
	completeXID string
}

// xaGroup looks at a MariaDB GTID event for the XA flags. It opens a
// prepare group itself (the Begin item carries the XID) and reports
// handled; a completion group opens no transaction and is handled too. raw
// is the event's bytes with the 19-byte header (may lack the checksum).
func (d *Decoder) xaGroup(raw []byte, e *replication.MariadbGTIDEvent, pos sluice.Position, ts uint32) (bool, error) {
	d.xas = xaState{}
	if e.Flags&(mariaFlPreparedXA|mariaFlCompletedXA) == 0 {
		return false, nil
	}
	xid, err := gtidXID(raw, e.Flags)
	if err != nil {
		return false, &sluice.Error{Op: "decode the XA GTID event " + d.gtid + " at " + posString(pos), Err: err,
			Hint: "check that the relay log is intact (sluice relay check); the source wrote an XA event sluice cannot read"}
	}
	if e.Flags&mariaFlCompletedXA != 0 {
		d.xas.completing, d.xas.completeXID = true, xid
		return true, nil
	}
	d.xas.xid = xid
	d.inTxn = true
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemBegin, GTID: d.gtid, Timestamp: ts, XID: xid})
	return true, nil
}

// gtidXID reads the XID behind a MariaDB GTID event's fixed part:
// seq_no 8, domain 4, flags2 1, [commit_id 8], formatID 4, gtrid_length 1,
// bqual_length 1, data (Gtid_log_event's constructor in log_event.cc).
func gtidXID(raw []byte, flags byte) (string, error) {
	const header = 19
	if len(raw) < header+13 {
		return "", fmt.Errorf("GTID event of %d bytes is too short for its XID", len(raw))
	}
	b := raw[header+13:]
	if flags&mariaFlGroupCommitID != 0 {
		if len(b) < 8 {
			return "", fmt.Errorf("GTID event is too short for its commit id")
		}
		b = b[8:]
	}
	if len(b) < 6 {
		return "", fmt.Errorf("GTID event is too short for its XID")
	}
	format := binary.LittleEndian.Uint32(b)
	gl, bl := int(b[4]), int(b[5])
	if gl > 64 || bl > 64 || len(b) < 6+gl+bl {
		return "", fmt.Errorf("GTID event has a bad XID (gtrid %d, bqual %d bytes)", gl, bl)
	}
	return formatXID(b[6:6+gl], b[6+gl:6+gl+bl], format), nil
}

// formatXID is an XID as MariaDB writes it in the binlog and as XA
// statements take it: X'gtrid',X'bqual',formatID.
func formatXID(gtrid, bqual []byte, format uint32) string {
	return "X'" + hex.EncodeToString(gtrid) + "',X'" + hex.EncodeToString(bqual) + "'," + strconv.FormatUint(uint64(format), 10)
}

// xaPrepare handles the XA_PREPARE_LOG_EVENT that ends a prepare group:
// one_phase 1, formatID 4, gtrid_length 4, bqual_length 4, data
// (XA_prepare_log_event in log_event.cc). go-mysql v1.16.0 has no type for
// it and returns it as a GenericEvent.
func (d *Decoder) xaPrepare(e *replication.GenericEvent, pos sluice.Position, ts uint32) error {
	b := e.Data
	if len(b) < 13 {
		return d.xaError(pos, "XA PREPARE event", fmt.Errorf("event of %d bytes is too short", len(b)))
	}
	gl, bl := int(binary.LittleEndian.Uint32(b[5:])), int(binary.LittleEndian.Uint32(b[9:]))
	if gl < 0 || bl < 0 || gl > 64 || bl > 64 || len(b) < 13+gl+bl {
		return d.xaError(pos, "XA PREPARE event", fmt.Errorf("bad XID (gtrid %d, bqual %d bytes)", gl, bl))
	}
	xid := formatXID(b[13:13+gl], b[13+gl:13+gl+bl], binary.LittleEndian.Uint32(b[1:]))
	if b[0] != 0 {
		// MySQL's XA COMMIT ... ONE PHASE: an ordinary commit.
		d.xas = xaState{}
		d.commit(pos, ts)
		return nil
	}
	if !d.inTxn || d.xas.xid == "" {
		return d.xaError(pos, "XA PREPARE "+xid, fmt.Errorf("the prepare event is not inside an XA transaction the decoder read from its start"))
	}
	if d.xas.xid != xid {
		return d.xaError(pos, "XA PREPARE "+xid, fmt.Errorf("the transaction was started as XA %s", d.xas.xid))
	}
	d.inTxn = false
	d.xas = xaState{}
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemXAPrepare, GTID: d.gtid, XID: xid, Timestamp: ts, End: d.endPos(pos)})
	return nil
}

// xa handles a Query event whose statement starts with "XA ".
func (d *Decoder) xa(e *replication.QueryEvent, q string, pos sluice.Position, ts uint32) error {
	verb, rest := xaVerb(q)
	switch verb {
	case "START", "BEGIN":
		// MySQL writes XA START as a statement; MariaDB folds it into the
		// GTID event (xaGroup).
		xid, _, err := parseXID(rest)
		if err != nil {
			return d.xaError(pos, q, err)
		}
		if d.inTxn {
			if d.xas.xid != xid {
				return d.xaError(pos, q, fmt.Errorf("XA START inside an open transaction"))
			}
			return nil
		}
		d.xas = xaState{xid: xid}
		d.inTxn = true
		// The Begin carries no XID: whether this group ends in XA
		// PREPARE or in XA COMMIT ... ONE PHASE shows only at its end.
		d.begin(ts)
		return nil
	case "END":
		xid, _, err := parseXID(rest)
		if err != nil {
			return d.xaError(pos, q, err)
		}
		if !d.inTxn || d.xas.xid != xid {
			return d.xaError(pos, q, fmt.Errorf("XA END of a transaction the decoder did not see start"))
		}
		return nil
	case "COMMIT", "ROLLBACK":
		xid, tail, err := parseXID(rest)
		if err != nil {
			return d.xaError(pos, q, err)
		}
		if verb == "COMMIT" && strings.EqualFold(strings.Join(strings.Fields(tail), " "), "ONE PHASE") {
			if !d.inTxn || d.xas.xid != xid {
				return d.xaError(pos, q, fmt.Errorf("XA COMMIT ONE PHASE of a transaction the decoder did not see start"))
			}
			d.xas = xaState{}
			d.commit(pos, ts)
			return nil
		}
		if strings.TrimSpace(tail) != "" {
			return d.xaError(pos, q, fmt.Errorf("unexpected %q after the XID", strings.TrimSpace(tail)))
		}
		if d.inTxn {
			return d.xaError(pos, q, fmt.Errorf("XA %s inside an open transaction", verb))
		}
		if d.xas.completing && d.xas.completeXID != xid {
			return d.xaError(pos, q, fmt.Errorf("the GTID event names XA %s", d.xas.completeXID))
		}
		d.xas = xaState{}
		kind := sluice.ItemXACommit
		if verb == "ROLLBACK" {
			kind = sluice.ItemXARollback
		}
		if kind == sluice.ItemXACommit && d.cfg.Handle != nil {
			// sluice skip of the completion group: its rows are never
			// applied, and the held rows are dropped.
			if h := d.cfg.Handle(d.gtid, pos); h != nil {
				if !h.Skip && len(h.SQL) > 0 {
					return d.xaError(pos, q, fmt.Errorf("sluice replace cannot stand for an XA COMMIT; use sluice skip"))
				}
				kind = sluice.ItemXARollback
			}
		}
		d.out = append(d.out, sluice.StreamItem{Kind: kind, GTID: d.gtid, XID: xid, Timestamp: ts, End: d.endPos(pos)})
		return nil
	}
	// XA PREPARE is written as its own event type, XA RECOVER changes
	// nothing and is never written: anything else is a shape this decoder
	// does not know, and guessing could lose or double a transaction.
	return d.xaError(pos, q, fmt.Errorf("unknown XA statement in the binlog"))
}

func (d *Decoder) xaError(pos sluice.Position, what string, err error) error {
	return &sluice.Error{Op: "replicate " + oneLine(what) + " (GTID " + d.gtid + ") at " + posString(pos), Err: err,
		Hint: "report this binlog sequence (mariadb-binlog -vv around the position) to the sluice developers; to go on without it, " +
			"apply the transaction by hand and run sluice skip for its GTID"}
}

// xaVerb splits "XA <VERB> rest".
func xaVerb(q string) (string, string) {
	s := strings.TrimSpace(q[2:])
	i := strings.IndexAny(s, " \t\r\n")
	if i < 0 {
		return strings.ToUpper(s), ""
	}
	return strings.ToUpper(s[:i]), s[i:]
}

// parseXID reads an XID at the start of s: gtrid[,bqual[,formatID]], each
// string a 'quoted' literal, X'hex' or 0xhex, and returns it in canonical
// form (formatXID) with the text after it.
func parseXID(s string) (string, string, error) {
	s = strings.TrimSpace(s)
	gtrid, s, err := xidString(s)
	if err != nil {
		return "", "", err
	}
	var bqual []byte
	format := uint64(1)
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, ",") {
		if bqual, s, err = xidString(strings.TrimSpace(s[1:])); err != nil {
			return "", "", err
		}
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, ",") {
			s = strings.TrimSpace(s[1:])
			i := 0
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
			if format, err = strconv.ParseUint(s[:i], 10, 32); err != nil {
				return "", "", fmt.Errorf("bad XID format id in %q", s)
			}
			s = s[i:]
		}
	}
	if len(gtrid) == 0 || len(gtrid) > 64 || len(bqual) > 64 {
		return "", "", fmt.Errorf("bad XID")
	}
	return formatXID(gtrid, bqual, uint32(format)), s, nil
}

// xidString reads one string of an XID.
func xidString(s string) ([]byte, string, error) {
	switch {
	case len(s) >= 2 && (s[0] == 'X' || s[0] == 'x') && s[1] == '\'':
		end := strings.IndexByte(s[2:], '\'')
		if end < 0 {
			return nil, "", fmt.Errorf("unterminated X'' in XID")
		}
		b, err := hex.DecodeString(s[2 : 2+end])
		if err != nil {
			return nil, "", fmt.Errorf("bad hex in XID: %v", err)
		}
		return b, s[3+end:], nil
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		i := 2
		for i < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i]) >= 0 {
			i++
		}
		b, err := hex.DecodeString(s[2:i])
		if err != nil {
			return nil, "", fmt.Errorf("bad hex in XID: %v", err)
		}
		return b, s[i:], nil
	case len(s) >= 1 && (s[0] == '\'' || s[0] == '"'):
		quote := s[0]
		var out []byte
		for i := 1; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s):
				i++
				out = append(out, unescape(s[i]))
			case c == quote && i+1 < len(s) && s[i+1] == quote:
				i++
				out = append(out, quote)
			case c == quote:
				return out, s[i+1:], nil
			default:
				out = append(out, c)
			}
		}
		return nil, "", fmt.Errorf("unterminated string in XID")
	}
	return nil, "", fmt.Errorf("no XID string in %q", oneLine(s))
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case '0':
		return 0
	case 'Z':
		return 26
	case 'b':
		return '\b'
	}
	return c
}

// rollback ends a group whose last statement is ROLLBACK. MariaDB writes
// one for an XA transaction rolled back before XA PREPARE after it also
// changed a non-transactional table: the non-transactional changes are a
// group of their own, committed, and this group holds the transactional
// rows, which a replica runs and then rolls back. (A plain transaction
// rolled back writes none of its transactional rows.) Its rows are
// discarded, and its end is still a position to resume from.
func (d *Decoder) rollback(pos sluice.Position, ts uint32) {
	d.xas = xaState{}
	if !d.inTxn {
		return
	}
	d.inTxn = false
	d.out = append(d.out, sluice.StreamItem{Kind: sluice.ItemRollback, GTID: d.gtid, Timestamp: ts, End: d.endPos(pos)})
}
