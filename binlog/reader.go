package binlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/backoff"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// Reader streams a source's binlog from a file/position. Events are
// returned raw (go-mysql's raw mode: only rotate and format description
// events are decoded), exactly as the source stores them, so the relay can
// keep them verbatim and decoding happens once, downstream.
//
// When the connection breaks, the Reader reconnects with backoff from the
// position just after the last event it returned; the server then resends
// an artificial rotate and the format description event, which consumers
// must expect (relay.Writer does). Fatal errors (purged binlog, access
// denied, missing privilege) end the stream.
type Reader struct {
	cfg Config

	mu         sync.Mutex
	next       sluice.Position // where a reconnect resumes
	reconnects int
	lastErr    error

	events chan *replication.BinlogEvent
	// queued is the bytes of the events in events; room is signalled when
	// the consumer takes one (see enqueue).
	queued atomic.Int64
	room   chan struct{}
	errc   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    error // sticky error for GetEvent after the stream ended
	// clock times the fetch stage (SetClock); nil: untimed.
	clock *stagetime.Clock
}

// SetClock makes the reader account its time in c (the fetch stage): its
// life from Start to the end of the stream, the source connection's reads
// that wait for bytes (wait_input), backoff between reconnects (wait_input
// too) and the hand-offs that wait for room in the queue to the relay
// writer (wait_output). Call it before Start.
func (r *Reader) SetClock(c *stagetime.Clock) { r.clock = c }

// NewReader validates cfg. Flavor must be set (Check detects it).
func NewReader(cfg Config) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Flavor == "" {
		return nil, &sluice.Error{Op: "binlog reader", Err: fmt.Errorf("%w: flavor not set", sluice.ErrConfig), Hint: "run binlog.Check first or set incremental.flavor"}
	}
	return &Reader{cfg: cfg}, nil
}

// Start begins streaming at pos (file and offset). It returns once the first
// connection is established or has failed for good, so bad credentials or a
// purged position are reported here. A transient failure (the source
// restarting between Check and Start, so the connection is refused or
// dropped) is retried in the background like any later reconnect: failing
// the task for it was a race a restart of the source could lose.
func (r *Reader) Start(ctx context.Context, pos sluice.Position) error {
	if r.events != nil {
		return errors.New("binlog: reader already started")
	}
	if pos.File == "" {
		return &sluice.Error{Op: "start binlog reader", Err: fmt.Errorf("%w: no binlog file given", sluice.ErrConfig), Hint: "give a binlog file and position, or a GTID set"}
	}
	if pos.Pos < 4 {
		pos.Pos = 4
	}
	r.next = pos
	life := r.clock.Begin()
	syncer, stream, err := r.connect(ctx)
	if err != nil {
		if ctx.Err() != nil || fatal(err) {
			r.clock.End(life)
			return err
		}
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
	}
	rctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.events = make(chan *replication.BinlogEvent, queueEvents)
	r.room = make(chan struct{}, 1)
	r.errc = make(chan error, 1)
	r.wg.Add(1)
	go func() {
		defer r.clock.End(life)
		r.run(rctx, syncer, stream, err)
	}()
	return nil
}

func (r *Reader) newSyncer() *replication.BinlogSyncer {
	c := r.cfg
	tc, fallback, err := dbconn.TLSConfig(c.Source, "source")
	if err != nil {
		tc = &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(tls.ConnectionState) error { return err }}
	} else if fallback && !c.ServerTLS {
		tc = nil
	}
	dial := (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if sock := c.Source.Socket; sock != "" {
		tcp := dial
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) { return tcp(ctx, "unix", sock) }
	}
	// go-mysql gets no ReadTimeout: it would set a read deadline around
	// every packet. silenceConn detects a silent connection instead.
	timeout := c.readTimeout()
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc := newSilenceConn(conn, timeout)
		sc.clock = r.clock
		return sc, nil
	}
	return replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: c.ServerID, Flavor: c.Flavor, Host: c.Source.Host, Port: uint16(c.Source.Port),
		User: c.Source.User, Password: c.Source.Password, Localhost: "sluice",
		RawModeEnabled: true, HeartbeatPeriod: c.Heartbeat,
		DisableRetrySync: true, Logger: c.logger(), EventCacheCount: syncerEvents,
		// Without annotate rows events MariaDB leaves holes in the stream;
		// the relay must hold every byte to stay identical to the source.
		DumpCommandFlag: dumpFlags(c.Flavor),
		Dialer:          dialer,
		TLSConfig:       tc,
	})
}

func dumpFlags(flavor string) uint16 {
	if flavor == gomysql.MariaDBFlavor {
		return replication.BINLOG_SEND_ANNOTATE_ROWS_EVENT
	}
	return 0
}

func (r *Reader) connect(ctx context.Context) (*replication.BinlogSyncer, *replication.BinlogStreamer, error) {
	r.mu.Lock()
	pos := r.next
	r.mu.Unlock()
	s := r.newSyncer()
	// StartSync takes no context; the dialer's timeout bounds it instead.
	st, err := s.StartSync(gomysql.Position{Name: pos.File, Pos: pos.Pos})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		s.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, classify(err, r.cfg, pos)
	}
	return s, st, nil
}

// run streams from st, or, when the first connection failed (err set),
// starts by reconnecting.
func (r *Reader) run(ctx context.Context, s *replication.BinlogSyncer, st *replication.BinlogStreamer, err error) {
	defer r.wg.Done()
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	failures := 0
	bo := backoff.New(r.cfg.MinBackoff, r.cfg.MaxBackoff)
	for {
		var ev *replication.BinlogEvent
		if st != nil {
			ev, err = st.GetEvent(ctx)
		}
		if err == nil {
			if failures > 0 {
				failures = 0
				bo.Reset()
			}
			r.advance(ev)
			if r.enqueue(ctx, ev) {
				continue
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		err = classify(err, r.cfg, r.Next())
		if fatal(err) {
			r.errc <- err
			return
		}
		// Transient: reconnect from the exact next position with backoff.
		// The note comes first: closing a syncer whose source went silent
		// waits for its KILL connection to time out too.
		r.notify("binlog: connection to the source lost at %s: %v; reconnecting", r.Next(), oneLine(err))
		lost := err
		if s != nil {
			s.Close()
		}
		s, st = nil, nil
		for {
			r.mu.Lock()
			r.lastErr = err
			r.mu.Unlock()
			failures++
			if r.cfg.MaxRetries > 0 && failures > r.cfg.MaxRetries {
				r.errc <- fmt.Errorf("binlog: gave up after %d reconnect attempts: %w", failures-1, err)
				return
			}
			t0 := r.clock.Enter(stagetime.WaitInput)
			ok := backoff.Sleep(ctx, bo.Next())
			r.clock.Leave(stagetime.WaitInput, t0)
			if !ok {
				return
			}
			s, st, err = r.connect(ctx)
			if err == nil {
				r.mu.Lock()
				r.reconnects++
				n := r.reconnects
				r.mu.Unlock()
				r.notify("%s", reconnectNote(r.Next(), failures, n, r.cfg.ServerID, lost)) // reconnectnote.go
				break
			}
			if ctx.Err() != nil {
				return
			}
			if fatal(err) {
				r.errc <- err
				return
			}
		}
	}
}

// The events read ahead of the consumer (the relay writer, which fsyncs)
// are bounded in bytes, not only in number: a huge transaction is
// thousands of row events of up to max_allowed_packet each, and a queue
// of 1024 + 256 of them held gigabytes (issue 14). go-mysql's own queue
// can only be bounded in events, so it is kept short and the reader's
// queue takes up to queueEvents events but at most queueBytes bytes (one
// event always fits, however large).
const (
	syncerEvents = 8
	queueEvents  = 1024
	queueBytes   = 16 << 20
)

// enqueue hands ev to the consumer once the queue has room for it; false
// when ctx ended first.
func (r *Reader) enqueue(ctx context.Context, ev *replication.BinlogEvent) bool {
	n := int64(len(ev.RawData))
	if q := r.queued.Load(); q == 0 || q+n <= queueBytes {
		// Room now, in bytes: try the channel before reading the clock.
		r.queued.Add(n)
		select {
		case r.events <- ev:
			return true
		default:
			r.queued.Add(-n)
		}
	}
	t0 := r.clock.Enter(stagetime.WaitOutput)
	defer r.clock.Leave(stagetime.WaitOutput, t0)
	for q := r.queued.Load(); q > 0 && q+n > queueBytes; q = r.queued.Load() {
		select {
		case <-r.room:
		case <-ctx.Done():
			return false
		}
	}
	r.queued.Add(n)
	select {
	case r.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// took gives back the room of an event the consumer took.
func (r *Reader) took(ev *replication.BinlogEvent) {
	r.queued.Add(-int64(len(ev.RawData)))
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// advance moves the resume position past ev, as the server counts it.
func (r *Reader) advance(ev *replication.BinlogEvent) {
	h := ev.Header
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case h.EventType == replication.ROTATE_EVENT:
		if re, ok := ev.Event.(*replication.RotateEvent); ok {
			r.next = sluice.Position{File: string(re.NextLogName), Pos: uint32(re.Position), Flavor: r.cfg.Flavor}
		}
	case h.EventType == replication.HEARTBEAT_EVENT || h.EventType == replication.HEARTBEAT_LOG_EVENT_V2:
	case h.LogPos > 0 && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0:
		r.next.Pos = h.LogPos
	}
}

// GetEvent returns the next event, blocking until one arrives, the stream
// fails fatally, or ctx ends.
func (r *Reader) GetEvent(ctx context.Context) (*replication.BinlogEvent, error) {
	if r.err != nil {
		return nil, r.err
	}
	select {
	case ev := <-r.events:
		r.took(ev)
		return ev, nil
	case err := <-r.errc:
		r.err = err
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryEvent returns an event only if one is ready now.
func (r *Reader) TryEvent() (*replication.BinlogEvent, bool) {
	select {
	case ev := <-r.events:
		r.took(ev)
		return ev, true
	default:
		return nil, false
	}
}

// Next is the position a reconnect would resume from: just after the last
// event received from the source. It runs ahead of GetEvent by the events
// buffered in between.
func (r *Reader) Next() sluice.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Reconnects counts successful reconnections; LastError is the error that
// caused the latest one.
func (r *Reader) Reconnects() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconnects, r.lastErr
}

// Close stops streaming and waits for the reader's goroutine.
func (r *Reader) Close() error {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
		r.cancel = nil
	}
	return nil
}

// classify turns a replication error into a *sluice.Error when the user
// must act, or leaves it for a retry.
func classify(err error, cfg Config, pos sluice.Position) error {
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	var me *gomysql.MyError
	if errors.As(err, &me) {
		op := "read binlog from source " + cfg.Source.Addr()
		switch me.Code {
		case 1236:
			msg := strings.ToLower(me.Message)
			if strings.Contains(msg, "purged") || strings.Contains(msg, "could not find") || strings.Contains(msg, "not find") {
				return &sluice.Error{Op: op, Err: fmt.Errorf("%w: at %s: %s", sluice.ErrBinlogPurged, describePos(pos), me.Message),
					Hint: "the source no longer has the binlog sluice needs; run the full migration again with --mode all, and keep binlogs longer on the source (expire_logs_days / binlog_expire_logs_seconds)"}
			}
			return &sluice.Error{Op: op, Err: fmt.Errorf("source refused to send the binlog at %s: %s", describePos(pos), me.Message),
				Hint: "check the start position in the task file against SHOW BINARY LOGS on the source"}
		case 1045, 1044, 1698:
			return &sluice.Error{Op: "connect to source " + cfg.Source.Addr(), Err: fmt.Errorf("%w for user %q: %s", sluice.ErrAccessDenied, cfg.Source.User, me.Message),
				Hint: "check source.user and source.password in the task file"}
		case 1227, 1142:
			return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %s", sluice.ErrPrivilege, me.Message),
				Hint: fmt.Sprintf("on the source run: GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'<host>'", cfg.Source.User)}
		}
	}
	return err
}

// fatal reports whether retrying cannot help.
func fatal(err error) bool {
	return errors.Is(err, sluice.ErrBinlogPurged) || errors.Is(err, sluice.ErrAccessDenied) ||
		errors.Is(err, sluice.ErrPrivilege) || errors.Is(err, sluice.ErrConfig) || func() bool {
		var se *sluice.Error
		return errors.As(err, &se)
	}()
}

func (r *Reader) notify(format string, args ...any) {
	if r.cfg.Notify != nil {
		r.cfg.Notify(format, args...)
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// describePos names a start position for a message: a GTID start has no
// file yet ("binlog purged: at :0" said nothing).
func describePos(p sluice.Position) string {
	switch {
	case p.File != "":
		return p.String()
	case p.GTIDSet != "":
		return "GTID position " + p.GTIDSet
	}
	return "the task's start position"
}
