package merge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
)

// Merger merges the sources' relay logs into one binlog. Its order:
//
//   - a source's transactions keep their order, and each is written whole
//     and contiguous (the relay readers return complete transactions only);
//   - between sources, the transaction with the oldest commit time (the
//     newest event timestamp in it, in seconds) goes first, ties in the
//     order they were read;
//   - a transaction is written only when every other source either has a
//     later one waiting or cannot send an earlier one any more: its
//     watermark (the time the relay last heard from it, by an event or a
//     heartbeat, while the merge had read all it had) is not older. An idle
//     source thus holds nothing back for longer than its heartbeat period,
//     and a source that is down holds the merge back until it returns
//     (Status names it), since a transaction it committed before going
//     down may still be on its way.
//
// Run owns the output; Status and GTID may be called concurrently.
type Merger struct {
	cfg   Config
	out   Output
	feeds []*feed

	// Output state, owned by Run.
	file        string // current file; "" before the first
	fileNo      int
	pendingNext string // the last file ended with a Rotate to this name
	size        int64
	tables      map[tableKey]uint64
	nextTable   uint64
	dirty       bool
	ckDirty     bool // merged transactions not yet in the checkpoint
	lastFlush   time.Time
	lastCkpt    time.Time
	arrivals    uint64
	spillBuf    []byte // reused to read back spilled events

	spills atomic.Uint64 // transactions spilled to disk
	total  counters      // the merged stream (metrics.go)
	delay  prometheus.Histogram

	xa xaTracker // XIDs prepared in the merged binlog (xa.go)

	fmtMu sync.Mutex
	first *format // the first source format seen: the others must agree

	mu      sync.Mutex
	st      state                      // GTID state of what is written
	ckpt    map[string]sluice.Position // the last checkpoint written
	waiting string                     // the source the merge waits for, "" when none
	waitXID string                     // the XA transaction of waiting that another source's waits for (xa.go)
	since   time.Time
}

type tableKey struct {
	src  int
	id   uint64
	name string
}

// feed is one source's reader state.
type feed struct {
	i    int
	src  Source
	ch   chan *txn
	pos  atomic.Pointer[sluice.Position] // after everything the feeder has queued or dropped
	skip uint64                          // transactions at or below this sequence number are merged already
	// native is the source's own GTID domain (-1 unknown): one source, one
	// domain, or its sequence numbers would not be one sequence.
	native int64
	// mem is what the source's waiting transactions (queued, or at the
	// head) hold in memory; spill.go keeps it at most SpillAbove.
	mem atomic.Int64
	// stats is its part of the merged stream (metrics.go).
	stats feedStats

	// Merge loop state.
	head  *txn
	wm    uint32    // watermark: the source sends no transaction older than this (unix seconds)
	heard time.Time // when the relay last heard from the source
	done  sluice.Position
}

type txn struct {
	events  [][]byte   // in memory, unless spilled
	mem     int64      // bytes in events
	spill   *spillFile // the events on disk (spill.go), or nil
	f       *format
	ts      uint32
	seq     uint64
	end     sluice.Position
	arrival uint64
	xa      xaMark // from its GTID event (xa.go)
	sid     uint32 // its GTID event's server id
}

// New builds a merger of srcs into out. Run recovers the output's state
// and starts.
func New(cfg Config, srcs []Source, out Output) (*Merger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, errors.New("merge: no sources")
	}
	m := &Merger{cfg: cfg, out: out, st: state{}, delay: newDelay()}
	names, domains := map[string]bool{}, map[uint32]bool{}
	for i, s := range srcs {
		if s.Name == "" || names[s.Name] || domains[s.DomainID] || s.Open == nil || s.Heard == nil {
			return nil, fmt.Errorf("merge: source %d (%q): needs a unique name, its own domain id, Open and Heard", i, s.Name)
		}
		names[s.Name], domains[s.DomainID] = true, true
		m.feeds = append(m.feeds, &feed{i: i, src: s, ch: make(chan *txn, cfg.Queue), native: -1})
	}
	return m, nil
}

// Run merges until ctx ends (then it flushes and returns nil) or an error
// stops it.
func (m *Merger) Run(ctx context.Context) error {
	starts, err := m.recover()
	if err != nil {
		return err
	}
	if err := resetSpillDir(m.cfg.SpillDir); err != nil {
		return err
	}
	// After the feeders have returned (the deferred Wait below runs
	// first): the transactions still waiting give back their files.
	defer m.cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	notify := make(chan struct{}, 1)
	errc := make(chan error, len(m.feeds))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, f := range m.feeds {
		in, err := f.src.Open(starts[f.i])
		if err != nil {
			return fmt.Errorf("merge: open the relay of source %s at %s: %w", f.src.Name, starts[f.i], err)
		}
		p := starts[f.i]
		f.pos.Store(&p)
		f.done = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer in.Close()
			if err := m.read(ctx, f, in, notify); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("merge: source %s: %w", f.src.Name, err)
			}
		}()
	}
	tick := time.NewTicker(m.cfg.Poll)
	defer tick.Stop()
	for {
		if m.file == "" {
			// A new merged binlog opens its first file as soon as one
			// source's format is known, so that replicas can connect
			// before the first transaction.
			m.fmtMu.Lock()
			fm := m.first
			m.fmtMu.Unlock()
			if fm != nil {
				if err := m.rotate(uint32(time.Now().Unix()), fm); err != nil {
					return err
				}
			}
		}
		for {
			f := m.pick()
			if f == nil {
				if err := m.xaDeadlock(); err != nil {
					if ferr := m.flush(true); ferr != nil {
						return errors.Join(err, ferr)
					}
					return err
				}
				break
			}
			if err := m.emit(f); err != nil {
				return err
			}
			if time.Since(m.lastFlush) >= m.cfg.FlushInterval {
				if err := m.flush(false); err != nil {
					return err
				}
			}
		}
		if err := m.flush(false); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return m.flush(true)
		case err := <-errc:
			if ferr := m.flush(true); ferr != nil {
				return errors.Join(err, ferr)
			}
			return err
		case <-notify:
		case <-tick.C:
		}
	}
}

// read is one source's feeder: it reads whole transactions from the
// source's relay and queues them; the events between transactions (the
// relay's format description, Gtid_list, Binlog_checkpoint and Rotate
// events) are the source file's, not the merged binlog's, and are dropped.
func (m *Merger) read(ctx context.Context, f *feed, in Input, notify chan<- struct{}) error {
	var cur *txn
	defer func() {
		if cur != nil {
			cur.spill.remove()
		}
	}()
	var file string
	var fm *format
	for {
		ev, err := in.Next(ctx)
		if err != nil {
			return err
		}
		if ev.Pos.File != file {
			raw, err := in.FDE(ev.Pos.File)
			if err != nil {
				return fmt.Errorf("format description event of relay file %s: %w", ev.Pos.File, err)
			}
			g, err := parseFDE(raw)
			if err != nil {
				return fmt.Errorf("relay file %s: %w", ev.Pos.File, err)
			}
			if err := m.checkFormat(g); err != nil {
				return err
			}
			file, fm = ev.Pos.File, &g
		}
		h, err := parseHeader(ev.Data)
		if err != nil {
			return fmt.Errorf("event ending at %s: %w", ev.Pos, err)
		}
		if cur == nil {
			if h.Type != replication.MARIADB_GTID_EVENT {
				if ev.Boundary {
					p := ev.Pos
					f.pos.Store(&p)
					continue
				}
				return &sluice.Error{Op: "global binlog", Err: fmt.Errorf("source %s: a transaction without a MariaDB GTID event ends at %s", f.src.Name, ev.Pos),
					Hint: "the global binlog merges MariaDB sources, whose transactions carry GTIDs; use a MariaDB source"}
			}
			seq, dom, ok := gtidOf(body(ev.Data, fm.crc))
			if !ok {
				return fmt.Errorf("malformed GTID event ending at %s", ev.Pos)
			}
			if f.native < 0 {
				f.native = int64(dom)
			} else if f.native != int64(dom) {
				return &sluice.Error{Op: "global binlog", Err: fmt.Errorf("source %s writes GTIDs of domains %d and %d (at %s)", f.src.Name, f.native, dom, ev.Pos),
					Hint: "each source of a global binlog must write one GTID domain (sequence numbers of two domains are not one sequence); merge such a source's own primaries instead"}
			}
			cur = &txn{f: fm, seq: seq, xa: xaOf(body(ev.Data, fm.crc)), sid: h.ServerID}
		}
		if err := m.add(f, cur, ev.Data); err != nil {
			return err
		}
		cur.ts = max(cur.ts, h.Timestamp)
		if !ev.Boundary {
			continue
		}
		cur.end = ev.Pos
		if cur.spill != nil {
			if err := cur.spill.done(); err != nil {
				return err
			}
		}
		if cur.seq > f.skip {
			f.mem.Add(cur.mem)
			select {
			case f.ch <- cur:
			case <-ctx.Done():
				f.mem.Add(-cur.mem)
				return ctx.Err()
			}
		} else {
			cur.spill.remove()
			m.xa.record(f.src.Name, m.mergedGTID(f, cur), cur.xa) // merged before a restart
		}
		p := ev.Pos
		f.pos.Store(&p)
		select {
		case notify <- struct{}{}:
		default:
		}
		cur = nil
	}
}

func (m *Merger) checkFormat(g format) error {
	m.fmtMu.Lock()
	defer m.fmtMu.Unlock()
	if m.first == nil {
		m.first = &g
		return nil
	}
	if err := m.first.compatible(g); err != nil {
		return &sluice.Error{Op: "global binlog", Err: err, Hint: "merge sources of one server version (the same MariaDB release writes the same event formats)"}
	}
	return nil
}

// pick returns the source whose head transaction goes next, or nil when
// none may go yet.
func (m *Merger) pick() *feed {
	var best *feed
	for _, f := range m.feeds {
		if f.head == nil {
			p := f.pos.Load() // before the queue is checked: see below
			select {
			case t := <-f.ch:
				m.arrivals++
				t.arrival = m.arrivals
				f.head = t
			default:
				// The queue is empty and p was stored after every queued
				// transaction was sent: the merge holds everything before p.
				hp, at := f.src.Heard()
				if !at.IsZero() {
					f.heard = at
				}
				if hp.File != "" && p.Compare(hp) >= 0 {
					f.wm = max(f.wm, uint32(at.Unix()))
					f.stats.advance(f.wm)
				}
			}
		}
		if f.head != nil && m.xaHeld(f) != "" {
			continue // xa.go: its XID is prepared by another source
		}
		if f.head != nil && (best == nil || f.head.ts < best.head.ts || f.head.ts == best.head.ts && f.head.arrival < best.head.arrival) {
			best = f
		}
	}
	if best == nil {
		name, xid := m.xaWaiting()
		m.setWaiting(name)
		m.mu.Lock()
		m.waitXID = xid
		m.mu.Unlock()
		return nil
	}
	for _, f := range m.feeds {
		if f.head == nil && f.wm < best.head.ts {
			m.setWaiting(f.src.Name)
			return nil
		}
	}
	m.setWaiting("")
	return best
}

func (m *Merger) setWaiting(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting != name {
		m.waiting, m.since = name, time.Now()
	}
	m.waitXID = ""
}

// emit writes f's head transaction, re-encoded for the merged file.
func (m *Merger) emit(f *feed) error {
	t := f.head
	if err := m.xa.check(f.src.Name, m.mergedGTID(f, t), t.xa); err != nil {
		return err
	}
	if m.file == "" || m.size >= m.cfg.MaxFileSize {
		if err := m.rotate(t.ts, t.f); err != nil {
			return err
		}
	}
	local := map[uint64]uint64{} // the source's table ids in this transaction -> the file's
	var sid uint32
	err := m.eachEvent(t, func(raw []byte) error {
		h, err := parseHeader(raw) // checked by read, but a spilled event was read back
		if err != nil {
			return err
		}
		b := body(raw, t.f.crc)
		// One field of the body changes: it is patched in the event's
		// copy that encode makes, not in another copy first (a rows event
		// can be as large as max_allowed_packet).
		var p patch
		switch {
		case h.Type == replication.MARIADB_GTID_EVENT:
			p = patch{off: 8, width: 4, v: uint64(f.src.DomainID)}
		case h.Type == replication.TABLE_MAP_EVENT:
			w := t.f.tableIDWidth(h.Type)
			if len(b) < w {
				return fmt.Errorf("merge: source %s: short table map event in transaction ending at %s", f.src.Name, t.end)
			}
			id := getUint(b, w)
			name, _ := tableName(b, w)
			key := tableKey{src: f.i, id: id, name: name}
			nid, ok := m.tables[key]
			if !ok {
				m.nextTable++
				nid = m.nextTable
				m.tables[key] = nid
			}
			local[id] = nid
			p = patch{width: w, v: nid}
		case isRows(h.Type):
			w := t.f.tableIDWidth(h.Type)
			if len(b) < w {
				return fmt.Errorf("merge: source %s: short rows event in transaction ending at %s", f.src.Name, t.end)
			}
			id := getUint(b, w)
			if nid, ok := local[id]; ok {
				p = patch{width: w, v: nid}
			} else if id != 1<<(8*w)-1 { // ~0: the dummy id that ends a statement
				return fmt.Errorf("merge: source %s: a rows event of table id %d has no table map before it in the transaction ending at %s", f.src.Name, id, t.end)
			}
		}
		s := h.ServerID
		if f.src.ServerID != 0 {
			s = f.src.ServerID
		}
		if h.Type == replication.MARIADB_GTID_EVENT {
			sid = s
		}
		ev := encodePatched(h.Type, s, h.Timestamp, h.Flags, b, m.size, p)
		if err := m.out.Write(ev); err != nil {
			return err
		}
		m.size += int64(len(ev))
		f.stats.events.Add(1)
		f.stats.bytes.Add(uint64(len(ev)))
		m.wrote(ev)
		return nil
	})
	if err != nil {
		return err
	}
	m.xa.record(f.src.Name, m.mergedGTID(f, t), t.xa)
	f.drop(t)
	f.done, f.head = t.end, nil
	m.dirty, m.ckDirty = true, true
	m.mu.Lock()
	m.st[f.src.DomainID] = gtid{ServerID: sid, Seq: t.seq}
	m.mu.Unlock()
	f.stats.txns.Add(1)
	f.stats.advance(t.ts)
	m.total.txns.Add(1)
	m.delay.Observe(max(0, time.Since(time.Unix(int64(t.ts), 0)).Seconds()))
	return nil
}

// rotate ends the current file (if any) with a Rotate event and opens the
// next: format description, Gtid_list of the state so far, checkpoint.
func (m *Merger) rotate(ts uint32, fm *format) error {
	ts = max(ts, uint32(time.Now().Unix()))
	next := m.pendingNext
	if next == "" {
		next = fmt.Sprintf("%s.%06d", m.cfg.Base, m.fileNo+1)
	}
	if m.file != "" {
		ev := rotateEvent(next, m.cfg.ServerID, ts, m.size)
		if err := m.out.Write(ev); err != nil {
			return err
		}
		m.wrote(ev)
	}
	if err := m.out.Write(ArtificialRotate(next, 4, m.cfg.ServerID)); err != nil {
		return err
	}
	m.file, m.size, m.pendingNext = next, int64(len(magic)), ""
	if n, ok := fileNumber(next); ok {
		m.fileNo = n
	} else {
		m.fileNo++
	}
	m.mu.Lock()
	st := m.st.clone()
	m.mu.Unlock()
	for _, mk := range []func(at int64) []byte{
		func(at int64) []byte { return fdeEvent(*fm, m.cfg.ServerID, ts, at) },
		func(at int64) []byte { return gtidListEvent(st, m.cfg.ServerID, ts, at) },
		func(at int64) []byte { return checkpointEvent(next, m.cfg.ServerID, ts, at) },
	} {
		ev := mk(m.size)
		if err := m.out.Write(ev); err != nil {
			return err
		}
		m.size += int64(len(ev))
		m.wrote(ev)
	}
	m.tables, m.nextTable = map[tableKey]uint64{}, 0
	m.dirty = true
	return nil
}

// flush makes what was written durable and visible, then, at most every
// CheckpointEvery (or when final), records where each source's relay is
// merged up to: those positions are only written after the data they
// stand for is fsynced, so after a crash they are never ahead of it.
func (m *Merger) flush(final bool) error {
	if m.dirty {
		if err := m.out.Flush(); err != nil {
			return err
		}
		m.dirty = false
		m.lastFlush = time.Now()
	}
	if m.ckDirty && (final || time.Since(m.lastCkpt) >= m.cfg.CheckpointEvery) {
		m.lastCkpt, m.ckDirty = time.Now(), false
		return m.writeCheckpoint()
	}
	return nil
}

// GTID is the merged binlog's GTID position (MariaDB form): the last
// transaction written of each source's domain.
func (m *Merger) GTID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.String()
}

// Status is the merge's progress.
type Status struct {
	// GTID is the merged binlog's GTID position.
	GTID string `json:"gtid"`
	// Transactions merged by this process, and the events and bytes
	// written to the merged binlog (the merge's own events included).
	Transactions uint64 `json:"transactions"`
	Events       uint64 `json:"events"`
	Bytes        uint64 `json:"bytes"`
	// Waiting names the source the merge waits for ("" when it does not
	// wait): it has nothing to merge and has not been heard from since
	// the oldest transaction waiting elsewhere was committed.
	Waiting string `json:"waiting,omitempty"`
	// WaitingSince is when the merge began waiting for it.
	WaitingSince time.Time `json:"waiting_since,omitempty"`
	// WaitingXID, when set, is why: another source's next transaction
	// uses this XID, which Waiting holds prepared in the merged binlog.
	WaitingXID string `json:"waiting_xid,omitempty"`
	// Spilled counts the transactions this process wrote to disk while
	// they waited (larger than SpillAbove, or beyond it with the others
	// waiting from their source).
	Spilled uint64 `json:"spilled,omitempty"`
	// Sources are each source's part, in the order of the sources.
	Sources []SourceStatus `json:"sources"`
}

// Status returns the merge's progress.
func (m *Merger) Status() Status {
	m.mu.Lock()
	s := Status{GTID: m.st.String(), Waiting: m.waiting, WaitingXID: m.waitXID, Spilled: m.spills.Load()}
	if m.waiting != "" {
		s.WaitingSince = m.since
	}
	m.mu.Unlock()
	s.Transactions, s.Events, s.Bytes = m.total.txns.Load(), m.total.events.Load(), m.total.bytes.Load()
	now := time.Now()
	for _, f := range m.feeds {
		s.Sources = append(s.Sources, SourceStatus{Name: f.src.Name, Transactions: f.stats.txns.Load(), Events: f.stats.events.Load(),
			Bytes: f.stats.bytes.Load(), LagSeconds: f.stats.lag(now)})
	}
	return s
}

// wrote counts an event of the merged binlog.
func (m *Merger) wrote(ev []byte) {
	m.total.events.Add(1)
	m.total.bytes.Add(uint64(len(ev)))
}
