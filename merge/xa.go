package merge

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-db/sluice"
)

// ErrXIDCollision: two sources of a global binlog use the same XA
// transaction id at once. A replica of the merged binlog runs every
// source's two-phase XA transaction as it was: XA START at the prepare
// group's GTID, XA PREPARE, and XA COMMIT or ROLLBACK of the XID at the
// completion. It can hold one prepared transaction per XID, so a second
// prepare of an XID that another source holds prepared stops it
// (XAER_DUPID), and a completion from another source would commit or roll
// back the wrong source's transaction. The merge stops before it writes
// such a transaction, and names both.
var ErrXIDCollision = errors.New("the same XA transaction id from two sources")

// Flags of a MariaDB GTID event (Gtid_log_event::flags2).
const (
	gtidFlGroupCommitID = 2
	gtidFlPreparedXA    = 64
	gtidFlCompletedXA   = 128
)

// xaMark is a transaction's part in two-phase XA, read from its GTID event.
type xaMark struct {
	prepare, complete bool
	xid               string // X'gtrid',X'bqual',formatID, as the binlog prints it
}

// xaOf reads the XA flags and XID of a MariaDB GTID event's body.
func xaOf(b []byte) xaMark {
	if len(b) < 13 {
		return xaMark{}
	}
	fl, rest := b[12], b[13:]
	if fl&(gtidFlPreparedXA|gtidFlCompletedXA) == 0 {
		return xaMark{}
	}
	if fl&gtidFlGroupCommitID != 0 {
		if len(rest) < 8 {
			return xaMark{}
		}
		rest = rest[8:]
	}
	m := xaMark{prepare: fl&gtidFlPreparedXA != 0, complete: fl&gtidFlCompletedXA != 0}
	if len(rest) >= 6 {
		gl, bl := int(rest[4]), int(rest[5])
		if len(rest) >= 6+gl+bl {
			m.xid = fmt.Sprintf("X'%s',X'%s',%d", hex.EncodeToString(rest[6:6+gl]), hex.EncodeToString(rest[6+gl:6+gl+bl]), binary.LittleEndian.Uint32(rest))
		}
	}
	return m
}

// xaOwner is the source whose prepared XA transaction holds an XID in the
// merged binlog, and its GTID there.
type xaOwner struct {
	Source string `json:"source"`
	GTID   string `json:"gtid"`
}

// xaTracker knows the XIDs prepared in the merged binlog and not completed
// yet. Run checks and records what it writes; a feeder records the
// transactions it skips after a restart (merged before the crash, after
// the checkpoint that restored the tracker).
type xaTracker struct {
	mu   sync.Mutex
	open map[string]xaOwner
}

// check returns ErrXIDCollision when transaction t of source src (GTID
// gtid in the merged binlog) prepares or completes an XID that another
// source holds prepared.
func (x *xaTracker) check(src, gtid string, t xaMark) error {
	if t.xid == "" {
		return nil
	}
	x.mu.Lock()
	o, ok := x.open[t.xid]
	x.mu.Unlock()
	if !ok || o.Source == src {
		return nil
	}
	what := "prepares"
	if !t.prepare {
		what = "completes"
	}
	return &sluice.Error{Op: "global binlog",
		Err: fmt.Errorf("%w: source %s %s XA transaction %s (GTID %s) while the merged binlog holds source %s's transaction of the same XID prepared (GTID %s): a replica holds one prepared transaction per XID",
			ErrXIDCollision, src, what, t.xid, gtid, o.Source, o.GTID),
		Hint: "make the applications of each source use XIDs of their own (e.g. the shard's name in the gtrid or bqual); the merged binlog ends before this transaction, so serve these sources as separate binlog services (sluice serve with source:) from here"}
}

// record notes a written (or skipped) transaction.
func (x *xaTracker) record(src, gtid string, t xaMark) {
	if t.xid == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.open == nil {
		x.open = map[string]xaOwner{}
	}
	switch {
	case t.prepare:
		x.open[t.xid] = xaOwner{Source: src, GTID: gtid}
	case t.complete:
		if o, ok := x.open[t.xid]; ok && o.Source == src {
			delete(x.open, t.xid)
		}
	}
}

// snapshot copies the open XIDs for the checkpoint.
func (x *xaTracker) snapshot() map[string]xaOwner {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.open) == 0 {
		return nil
	}
	out := make(map[string]xaOwner, len(x.open))
	for k, v := range x.open {
		out[k] = v
	}
	return out
}

// restore sets the open XIDs from a checkpoint.
func (x *xaTracker) restore(open map[string]xaOwner) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open = map[string]xaOwner{}
	for k, v := range open {
		x.open[k] = v
	}
}

// mergedGTID names transaction t of feed f as the merged binlog does: the
// source's domain-id, its server id (or the configured one), its sequence
// number.
func (m *Merger) mergedGTID(f *feed, t *txn) string {
	sid := t.sid
	if f.src.ServerID != 0 {
		sid = f.src.ServerID
	}
	return fmt.Sprintf("%d-%d-%d", f.src.DomainID, sid, t.seq)
}

// xaHeld names the source that holds prepared the XID that f's head
// transaction prepares or completes, or "". Such a transaction waits (and
// with it the rest of its source) until that source's completion is
// merged: then a replica of the merged binlog meets the two transactions
// one after the other, as they may well have run. The merge order between
// sources is the commit time in seconds, so two shards that reuse an XID
// within a second would otherwise collide by chance.
func (m *Merger) xaHeld(f *feed) string {
	t := f.head
	if t == nil || t.xa.xid == "" {
		return ""
	}
	m.xa.mu.Lock()
	defer m.xa.mu.Unlock()
	if o, ok := m.xa.open[t.xa.xid]; ok && o.Source != f.src.Name {
		return o.Source
	}
	return ""
}

// xaWaiting names the source whose completion a held transaction waits
// for and its XID, "" when none waits (for Status: the merge waits for
// that source).
func (m *Merger) xaWaiting() (string, string) {
	for _, f := range m.feeds {
		if o := m.xaHeld(f); o != "" {
			return o, f.head.xa.xid
		}
	}
	return "", ""
}

// xaDeadlock returns ErrXIDCollision when held transactions wait for each
// other in a cycle (source A's next transaction prepares an XID that B
// holds, and B's next one an XID that A holds): neither completion can
// come first, since each source's order is kept.
func (m *Merger) xaDeadlock() error {
	byName := map[string]*feed{}
	for _, f := range m.feeds {
		byName[f.src.Name] = f
	}
	for _, f := range m.feeds {
		g := f
		for range m.feeds {
			o := m.xaHeld(g)
			if o == "" {
				break
			}
			g = byName[o]
			if g == nil || g.head == nil {
				break
			}
			if g == f {
				err := m.xa.check(f.src.Name, m.mergedGTID(f, f.head), f.head.xa)
				var se *sluice.Error
				if errors.As(err, &se) {
					se.Err = fmt.Errorf("%w, and source %s's next transaction waits in turn for one of source %s's", se.Err, m.xaHeld(f), f.src.Name)
				}
				return err
			}
		}
	}
	return nil
}
