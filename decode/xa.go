package decode

import (
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// STUB: helper h4 writes the real XA handling in this file; the lead
// replaces this stub with it at merge time. Until then two-phase XA stops
// the task by name instead of being dropped.

// xa handles an XA statement of a Query event (XA START, END, PREPARE,
// COMMIT, ROLLBACK).
func (d *Decoder) xa(e *replication.QueryEvent, q string, pos sluice.Position, ts uint32) error {
	if ws := words(q, 8); len(ws) > 2 && ws[1].w == "COMMIT" && ws[len(ws)-2].w == "ONE" && ws[len(ws)-1].w == "PHASE" {
		// XA COMMIT ... ONE PHASE: MariaDB logs the transaction as an
		// ordinary one (BEGIN, rows, XID), so the statement itself
		// changes nothing here (the behaviour before the closed world).
		return nil
	}
	return d.refuseStatement(pos, q, "two-phase XA is not supported", xaHint(pos))
}

// xaPrepare handles the XA_PREPARE_LOG_EVENT that ends the first phase of
// an XA transaction (go-mysql leaves its body undecoded).
func (d *Decoder) xaPrepare(e *replication.GenericEvent, pos sluice.Position, ts uint32) error {
	if d.cfg.Handle != nil && d.gtid != "" {
		if h := d.cfg.Handle(d.gtid, sluice.Position{}); h != nil && h.Skip {
			d.commit(pos, ts) // sluice skip --gtid: the group ends here, empty
			return nil
		}
	}
	return d.refuseStatement(pos, "XA PREPARE", "two-phase XA is not supported", xaHint(pos))
}

func xaHint(pos sluice.Position) string {
	return "commit XA transactions in one phase on the source (XA COMMIT ... ONE PHASE), or apply this XA transaction to the target by hand and run sluice skip --config TASK --gtid <its GTID> for each of its groups (the XA START ... XA PREPARE group and the XA COMMIT or XA ROLLBACK group)"
}
