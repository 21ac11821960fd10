package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/go-sql-driver/mysql"
)

// endpoint is one binlog server the consumer reads: sluice serve or a
// MariaDB source directly. Written name=user:password@host:port[/markers];
// ${VAR} in the password is expanded, so that no password shows in ps.
// markers is how many heartbeat sources' final markers end its window
// (default: every -heartbeat source; 1 for a consumer of one shard).
type endpoint struct {
	Name, User, Password, Host string
	Port, Markers              int
}

func parseEndpoint(s string) (endpoint, error) {
	var e endpoint
	bad := fmt.Errorf("consumer %q: want name=user:password@host:port[/markers]", s)
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return e, bad
	}
	i := strings.LastIndexByte(rest, '@')
	if i < 0 {
		return e, bad
	}
	cred, addr := rest[:i], rest[i+1:]
	e.Name = name
	e.User, e.Password, _ = strings.Cut(cred, ":")
	e.Password = os.ExpandEnv(e.Password)
	if a, m, ok := strings.Cut(addr, "/"); ok {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 {
			return e, bad
		}
		addr, e.Markers = a, n
	}
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil {
		return e, bad
	}
	e.Host, e.Port = host, p
	return e, nil
}

func (e endpoint) dsn() string {
	return fmt.Sprintf("%s:%s@tcp(%s:%d)/", e.User, e.Password, e.Host, e.Port)
}

// consumer reads one endpoint's binlog from its current position with
// go-mysql's BinlogSyncer, decoding every event (raw mode off, as a CDC
// tool does), and counts what arrives after the window opens.
type consumer struct {
	ep       endpoint
	serverID uint32
	markers  int // final markers (one per heartbeat source) that end the window

	mu        sync.Mutex
	start     time.Time // window start; zero until opened
	events    int64
	bytes     int64
	txns      int64
	hbTxns    int64
	seen      int // final markers seen
	end       time.Time
	dt        *hdrhistogram.Histogram // µs
	arrived   map[hbKey]int64         // heartbeat -> arrival, µs (commitdt.go)
	runID     int64
	done      chan struct{}
	large     largeObs
	inLarge   bool
	largeSeen bool
	stalls    []stall

	// Catch-up reads (part catchup): from a given position instead of the
	// current one, until the event that ends at until; the window opens
	// at the first event.
	from, until *mysql.Position
	curFile     string
}

// largeObs is what the consumer saw of the one big transaction (table
// bench.big): its first event's and its XID's arrival, and its size.
type largeObs struct {
	first, xid    time.Time
	events, bytes int64
}

func newConsumer(ep endpoint, serverID uint32, markers int, runID int64) *consumer {
	return &consumer{ep: ep, serverID: serverID, markers: markers, runID: runID,
		dt: hdrhistogram.New(1, 3_600_000_000, 3), done: make(chan struct{}), arrived: map[hbKey]int64{}}
}

// position is the endpoint's SHOW MASTER STATUS: sluice serve answers it
// with its relay's (or merged binlog's) end.
func (c *consumer) position(ctx context.Context) (mysql.Position, error) {
	db, err := sql.Open("mysql", c.ep.dsn())
	if err != nil {
		return mysql.Position{}, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return mysql.Position{}, fmt.Errorf("%s: SHOW MASTER STATUS: %w", c.ep.Name, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return mysql.Position{}, fmt.Errorf("%s: SHOW MASTER STATUS is empty (binary log off?)", c.ep.Name)
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return mysql.Position{}, err
	}
	pos, err := strconv.ParseUint(string(vals[1]), 10, 32)
	if err != nil {
		return mysql.Position{}, fmt.Errorf("%s: position %q: %w", c.ep.Name, vals[1], err)
	}
	return mysql.Position{Name: string(vals[0]), Pos: uint32(pos)}, nil
}

// run streams until ctx ends. ready is closed once the dump has started.
func (c *consumer) run(ctx context.Context, ready chan<- error) error {
	var pos mysql.Position
	var err error
	if c.from != nil {
		pos = *c.from
	} else if pos, err = c.position(ctx); err != nil {
		ready <- err
		return err
	}
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: c.serverID, Flavor: mysql.MariaDBFlavor, Host: c.ep.Host, Port: uint16(c.ep.Port),
		User: c.ep.User, Password: c.ep.Password, HeartbeatPeriod: time.Second,
		// Warnings and errors go to stderr: go-mysql reconnects on its own
		// after a broken stream, silently with a discarding logger, and a
		// consumer stuck in that loop looked like a slow server.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("consumer", c.ep.Name),
	})
	defer s.Close()
	st, err := s.StartSync(pos)
	if err != nil {
		err = fmt.Errorf("%s: start dump at %s: %w", c.ep.Name, pos, err)
		ready <- err
		return err
	}
	ready <- nil
	for {
		ev, err := st.GetEvent(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("%s: %w", c.ep.Name, err)
		}
		c.observe(ev, time.Now())
	}
}

func (c *consumer) open(t time.Time) {
	c.mu.Lock()
	c.start = t
	c.mu.Unlock()
}

func (c *consumer) observe(ev *replication.BinlogEvent, now time.Time) {
	h := ev.Header
	switch h.EventType {
	case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
		return
	}
	if r, ok := ev.Event.(*replication.RotateEvent); ok {
		c.curFile = string(r.NextLogName)
	}
	if h.LogPos == 0 { // artificial Rotate / FDE at the dump's start: not binlog content
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.from != nil && c.start.IsZero() {
		// A catch-up read's window opens at its first event: the
		// handshake would weigh heavily in a short read.
		c.start = now
	}
	if c.start.IsZero() || !c.end.IsZero() {
		return // outside the window
	}
	c.events++
	c.bytes += int64(h.EventSize)
	if c.until != nil && c.end.IsZero() && c.curFile == c.until.Name && h.LogPos >= c.until.Pos {
		c.end = now
		close(c.done)
	}
	if c.inLarge {
		c.large.events++
		c.large.bytes += int64(h.EventSize)
	}
	switch e := ev.Event.(type) {
	case *replication.XIDEvent:
		c.txns++
		if c.seen == c.markers && c.markers > 0 {
			// The last marker's transaction ends the window: every
			// reader counts the markers' transactions alike.
			c.end = now
			close(c.done)
		}
		if c.inLarge {
			c.large.xid = now
			c.inLarge, c.largeSeen = false, true
		}
	case *replication.QueryEvent:
		if string(e.Query) == "COMMIT" {
			c.txns++
		}
	case *replication.RowsEvent:
		if string(e.Table.Schema) != "bench" {
			return
		}
		switch string(e.Table.Table) {
		case "heartbeat":
			c.hbTxns++
			for _, row := range e.Rows {
				// bench.heartbeat is (run BIGINT, ts BIGINT, mark TINYINT, id BIGINT, src TINYINT).
				if len(row) < 5 {
					continue
				}
				run, _ := row[0].(int64)
				ts, _ := row[1].(int64)
				mark, _ := row[2].(int8)
				id, _ := row[3].(int64)
				src, _ := row[4].(int8)
				if run != c.runID {
					continue
				}
				if mark == 1 {
					c.seen++ // the window ends at this transaction's XID
					continue
				}
				if d := now.UnixMicro() - ts; d >= 0 {
					_ = c.dt.RecordValue(d)
					c.noteStall(now, d)
				}
				c.arrived[hbKey{src, id}] = now.UnixMicro()
			}
		case "big":
			if !c.inLarge && !c.largeSeen {
				c.inLarge = true
				c.large.first = now
				c.large.events, c.large.bytes = 1, int64(h.EventSize)
			}
		}
	}
}

// stallMicros is the delay from which a heartbeat counts as a stall: the
// stalls' times (since the window opened) show whether the tail is
// periodic (a purge, a timer) or follows the machine's load.
const stallMicros = 200_000

// noteStall keeps the worst delay per second of the window, for the
// samples over stallMicros.
func (c *consumer) noteStall(now time.Time, d int64) {
	if d < stallMicros {
		return
	}
	at := int(now.Sub(c.start).Seconds())
	if n := len(c.stalls); n > 0 && c.stalls[n-1].At == at {
		c.stalls[n-1].MS = max(c.stalls[n-1].MS, d/1000)
		return
	}
	c.stalls = append(c.stalls, stall{At: at, MS: d / 1000})
}

// stall is a second of the window (since it opened) in which a heartbeat
// arrived stallMicros or more after it was written, with the worst delay.
type stall struct {
	At int   `json:"at_s"`
	MS int64 `json:"ms"`
}

// result is one consumer's figures over its window: from the load's start
// to the arrival of the last final marker (so a consumer that lags shows
// it as a lower rate).
type result struct {
	Name          string  `json:"name"`
	Events        int64   `json:"events"`
	Bytes         int64   `json:"bytes"`
	Txns          int64   `json:"txns"`
	HeartbeatTxns int64   `json:"heartbeat_txns"`
	Secs          float64 `json:"secs"`
	EPS           float64 `json:"eps"`
	BPS           float64 `json:"bps"`
	TPS           float64 `json:"tps"`
	DTp50         float64 `json:"dt_p50_ms"`
	DTp99         float64 `json:"dt_p99_ms"`
	DTmax         float64 `json:"dt_max_ms"`
	DTn           int64   `json:"dt_samples"`
	// From the commit's acknowledgement (a lower bound of the delay from
	// the commit; arrivals before the OK count as 0, AckEarly of them),
	// and behind the first reader of the same heartbeat: commitdt.go.
	AckDTp50  float64 `json:"ack_dt_p50_ms"`
	AckDTp99  float64 `json:"ack_dt_p99_ms"`
	AckDTn    int64   `json:"ack_dt_samples"`
	AckEarly  int64   `json:"ack_early"`
	Behindp50 float64 `json:"behind_first_p50_ms"`
	Behindp99 float64 `json:"behind_first_p99_ms"`
	Complete  bool    `json:"complete"`
	Stalls    []stall `json:"stalls,omitempty"`
	// The large transaction (part large): XID arrival - COMMIT sent,
	// and its events' rate from its first event to its XID.
	LargeDT  float64 `json:"large_dt_ms,omitempty"`
	LargeBPS float64 `json:"large_bps,omitempty"`
	LargeEPS float64 `json:"large_eps,omitempty"`
}

func (c *consumer) result(fallbackEnd time.Time, commitSent time.Time) result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := result{Name: c.ep.Name, Events: c.events, Bytes: c.bytes, Txns: c.txns, HeartbeatTxns: c.hbTxns, Stalls: c.stalls}
	end := c.end
	r.Complete = !end.IsZero()
	if end.IsZero() {
		end = fallbackEnd
	}
	r.Secs = end.Sub(c.start).Seconds()
	if r.Secs > 0 {
		r.EPS, r.BPS, r.TPS = float64(c.events)/r.Secs, float64(c.bytes)/r.Secs, float64(c.txns)/r.Secs
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	r.DTn = c.dt.TotalCount()
	r.DTp50, r.DTp99, r.DTmax = ms(c.dt.ValueAtQuantile(50)), ms(c.dt.ValueAtQuantile(99)), ms(c.dt.Max())
	if c.largeSeen {
		if !commitSent.IsZero() {
			r.LargeDT = float64(c.large.xid.Sub(commitSent).Microseconds()) / 1000
		}
		if s := c.large.xid.Sub(c.large.first).Seconds(); s > 0 {
			r.LargeBPS, r.LargeEPS = float64(c.large.bytes)/s, float64(c.large.events)/s
		}
	}
	return r
}
