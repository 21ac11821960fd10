package replicate

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/backoff"
	"github.com/sluice-db/sluice/internal/snapfilter"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/schema"
)

// The one replication runner. A task with a target (Task) and a task with
// a Kafka sink (SinkTask) run the same pipeline and differ only in its
// end, the consumer of the decoded stream:
//
//	binlog reader -> relay log -> relay reader -> decoder -> consumer
//	  (fetch)                     (consume: restarted from the
//	                               consumer's checkpoint, with backoff)
//
// and a status loop beside them. The consumer keeps its own checkpoint (the
// applier in the target's transactions, the sink in Kafka's), so a failure
// of the consuming half restarts only that half, from the checkpoint,
// while the binlog reader goes on filling the relay.
//
// The binlog servers (RunServe, RunGlobalServe) share the pieces that
// match, fetch, the group and the status loop, but not the runner. They
// have no consumer that this process feeds and restarts: their replicas
// pull the relay through serve.Server, each from its own position, and
// the relay's own end is the only checkpoint. The global binlog's merge
// reads N relays at once and keeps its checkpoint in the merged relay;
// it has no item stream to submit, and its failures stop the service.

// consumer takes the decoded stream: apply.Applier and kafka.Sink. Both
// run goroutines of their own and may fail on their own, so Done and Err
// tell the read loop, as context.Context's do, that it must stop.
type consumer interface {
	// Submit queues one item; it blocks while the consumer's queue is full.
	Submit(ctx context.Context, it sluice.StreamItem) error
	// Flush waits until every transaction submitted before it is committed.
	Flush(ctx context.Context) error
	// Done is closed once the consumer has stopped (Err says why).
	Done() <-chan struct{}
	Err() error
	Close() error
}

// end configures the pipeline for one kind of consumer.
type end interface {
	// begin readies the consumer's side of a run and returns the position
	// the stream starts at: the consumer's checkpoint, seeded first for a
	// new task (from start, else Config.Start). release, when not nil,
	// ends what begin opened, when the run ends.
	begin(ctx context.Context, start *sluice.Position, info *binlog.Info, bcfg binlog.Config) (pos sluice.Position, release func(), err error)
	// dest names the consumer in the run's first log line.
	dest() string
	// beside starts what runs beside the pipeline until stop (nil: nothing).
	beside(rlog *relay.Log, m *metrics) (stop func(), err error)
	// open readies a consumer at its checkpoint, and the decoder and relay
	// reader there, for one run of the read loop.
	open(ctx context.Context, rlog *relay.Log) (*session, error)
	// fatal says that no restart from the checkpoint fixes err;
	// restarting says (log, status, metrics) that one comes after wait.
	fatal(err error) bool
	restarting(err error, wait time.Duration)
	// report is the task's status for the status loop and the last line.
	report() Status
}

// session is one run of a consumer, from its checkpoint.
type session struct {
	c   consumer
	dec *decode.Decoder
	r   *relay.Reader
	// own drops the task's own writes (ownwrites.go); copied drops what
	// the task's full copy holds already (copyfilter.go; nil: none).
	own    ownWrites
	copied *snapfilter.Filter
	// retire, when set, runs after the consumer is closed.
	retire func()
}

// pipeline runs the task once, from the consumer's checkpoint, until ctx
// ends (nil) or a fatal error.
func (t *Task) pipeline(ctx context.Context, e end, start *sluice.Position, m *metrics) error {
	bcfg := t.cfg.Binlog
	bcfg.Source = t.cfg.Source
	if bcfg.Notify == nil {
		bcfg.Notify = t.logf
	}
	info, err := binlog.Check(ctx, bcfg)
	if err != nil {
		return err
	}
	bcfg.Flavor, bcfg.ServerTLS = info.Flavor, info.TLS
	t.cfg.Relay.Flavor, t.cfg.Decode.Flavor = info.Flavor, info.Flavor
	pos, release, err := e.begin(ctx, start, info, bcfg)
	if release != nil {
		defer release()
	}
	if err != nil {
		return err
	}
	rlog, err := relay.Open(t.cfg.Relay)
	if err != nil {
		return err
	}
	defer rlog.Close()
	if !rlog.Has(pos) {
		// The relay does not hold the start (first run, or the relay was
		// lost): fetch again from its file. A start newer than the binlog
		// list read above (a snapshot begin took) needs the list again.
		if info, err = binlog.Check(ctx, bcfg); err != nil {
			return err
		}
		if err := binlog.CheckPosition(info, pos, t.cfg.Source); err != nil {
			return err
		}
		if err := rlog.Reset(); err != nil {
			return err
		}
	}
	rlog.SetApplied(pos)
	t.mu.Lock()
	t.rlog = rlog
	metOn := t.metOn
	t.mu.Unlock()
	t.logf("source %s (%s), %s, from %s; relay in %s; metrics on %s", t.cfg.Source, info.Flavor, e.dest(), pos, t.cfg.Relay.Dir, metOn)
	stop, err := e.beside(rlog, m)
	if err != nil {
		return err
	}
	if stop != nil {
		defer stop()
	}
	g := newGroup(ctx)
	g.Go(func(ctx context.Context) error { return fetch(ctx, rlog, bcfg, pos, &t.clocks, t.fetching) })
	g.Go(func(ctx context.Context) error { return t.consume(ctx, rlog, e) })
	g.Go(func(ctx context.Context) error { t.statusLoop(ctx, m, e.report); return nil })
	if err := g.Wait(); err != nil {
		return err
	}
	t.logf("stopped at %s", e.report().Applied)
	return nil
}

// fetching records the binlog reader and the relay writer of a run, for
// the status.
func (t *Task) fetching(w *relay.Writer, br *binlog.Reader) {
	t.mu.Lock()
	t.writer, t.breader = w, br
	t.mu.Unlock()
}

// fetch copies the source's binlog into the relay from pos until ctx ends
// (nil). The binlog reader reconnects by itself; what reaches here is
// fatal. started, when set, receives the writer and the reader once the
// dump runs; clocks, when set, time them.
func fetch(ctx context.Context, rlog *relay.Log, bcfg binlog.Config, pos sluice.Position, clocks *pipelineClocks, started func(*relay.Writer, *binlog.Reader)) error {
	w, err := rlog.NewWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	br, err := binlog.NewReader(bcfg)
	if err != nil {
		return err
	}
	defer br.Close()
	if clocks != nil {
		br.SetClock(&clocks.fetch)
		w.SetClock(&clocks.relayWrite)
	}
	if err := br.Start(ctx, w.Resume(pos)); err != nil {
		return err
	}
	if started != nil {
		started(w, br)
	}
	err = w.Run(ctx, br)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// consume feeds the consumer from its checkpoint, and again from the
// checkpoint after a failure a restart heals (a target or broker restart,
// a lost connection).
func (t *Task) consume(ctx context.Context, rlog *relay.Log, e end) error {
	return t.cfg.retryLoop(ctx, func() error { return t.consumeOnce(ctx, rlog, e) }, e.fatal,
		func(err error, wait time.Duration) {
			t.restarts.Add(1)
			e.restarting(err, wait)
		})
}

// consumeOnce is one run of the read loop: relay reader, decoder, the
// task's filters, consumer.
func (t *Task) consumeOnce(ctx context.Context, rlog *relay.Log, e end) (err error) {
	s, err := e.open(ctx, rlog)
	if err != nil {
		return err
	}
	defer s.r.Close()
	defer func() {
		if err == nil && ctx.Err() != nil || errors.Is(err, context.Canceled) {
			// Clean stop: commit what was submitted, so a restart has less to redo.
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = s.c.Flush(fctx)
			cancel()
		}
		if cerr := s.c.Close(); err == nil && ctx.Err() == nil {
			err = cerr
		}
		if s.retire != nil {
			s.retire()
		}
	}()
	t.setStage(StageRunning, nil)
	// The reader waits while the source is idle; a consumer that fails
	// meanwhile must still stop the loop, or the task would look running
	// with its last transactions not committed.
	rctx, stopRead := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-rctx.Done():
		case <-s.c.Done():
			stopRead()
		}
	}()
	defer watch.Wait()
	defer stopRead()
	defer t.clocks.decode.End(t.clocks.decode.Begin())
	// Everything before a failing event is committed first, so that a
	// stop names the first event not applied.
	stopAt := func(err error) error {
		if ferr := s.c.Flush(ctx); ferr != nil {
			return ferr
		}
		return err
	}
	for {
		ev, p, err := s.r.Next(rctx)
		if err != nil {
			if cerr := s.c.Err(); cerr != nil {
				return cerr
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		t.events.Add(1)
		t.setRead(p)
		if !s.own.keep(ev) {
			continue
		}
		items, err := s.dec.Feed(ev, p)
		if err != nil {
			return stopAt(err)
		}
		for i := range items {
			it := items[i]
			if s.copied != nil {
				keep, err := s.copied.Item(&it, p)
				if err != nil {
					return stopAt(err)
				}
				if !keep {
					continue
				}
			}
			if it.Kind.EndsTxn() {
				t.addPending(it.End, it.Timestamp) // the lag until the consumer has it
			}
			if err := s.c.Submit(ctx, it); err != nil {
				return err
			}
		}
	}
}

// openDecoder readies a decoder at a checkpoint, with the schema state
// saved with it, and a relay reader there (on a first run it waits until
// the writer has stored the start).
func openDecoder(ctx context.Context, rlog *relay.Log, dcfg decode.Config, pos sluice.Position, state []byte) (*decode.Decoder, *relay.Reader, error) {
	tracker := schema.NewTracker()
	if state != nil {
		if err := tracker.Restore(state); err != nil {
			return nil, nil, err
		}
	}
	dcfg.GTIDPos = pos.GTIDSet
	dec, err := decode.New(dcfg, tracker)
	if err != nil {
		return nil, nil, err
	}
	if err := rlog.WaitFor(ctx, pos); err != nil {
		return nil, nil, err
	}
	r, err := rlog.NewReader(pos, decode.NewParser(dcfg.Flavor))
	if err != nil {
		return nil, nil, err
	}
	r.SkipComments() // the decoder ignores them
	return dec, r, nil
}

// retryLoop runs once until ctx ends (nil) or it fails in a way fatal says
// no retry fixes. Between tries it calls onRetry and waits by
// internal/backoff: RetryMin, doubled each time up to RetryMax, with
// jitter, and RetryMin again after a run that lasted a minute.
func (c Config) retryLoop(ctx context.Context, once func() error, fatal func(error) bool, onRetry func(err error, wait time.Duration)) error {
	bo := backoff.New(c.RetryMin, c.RetryMax)
	for {
		began := time.Now()
		err := once()
		if ctx.Err() != nil {
			return nil
		}
		if fatal(err) {
			return err
		}
		if time.Since(began) > time.Minute {
			bo.Reset()
		}
		wait := bo.Next().Round(time.Millisecond)
		onRetry(err, wait)
		if !backoff.Sleep(ctx, wait) {
			return nil
		}
	}
}

// group runs a runner's goroutines (errgroup): the first to end stops the
// others, and Wait returns the first failure. A goroutine that ends
// without one, or with the context.Canceled of the stop, stops the others
// cleanly.
type group struct {
	eg   *errgroup.Group
	ctx  context.Context
	stop context.CancelFunc
}

func newGroup(ctx context.Context) *group {
	eg, ectx := errgroup.WithContext(ctx)
	gctx, stop := context.WithCancel(ectx)
	return &group{eg: eg, ctx: gctx, stop: stop}
}

// Go runs f with the group's context.
func (g *group) Go(f func(ctx context.Context) error) {
	g.eg.Go(func() error {
		err := f(g.ctx)
		if err == nil || errors.Is(err, context.Canceled) {
			g.stop()
			return nil
		}
		return err
	})
}

// Wait waits for every goroutine of the group.
func (g *group) Wait() error {
	err := g.eg.Wait()
	g.stop()
	return err
}

// statusLoop refreshes status.json, the metrics and the rates until ctx
// ends, and lets the relay purge what the consumer holds (the applied
// position). status is the task's status.
func (t *Task) statusLoop(ctx context.Context, m *metrics, status func() Status) {
	tick := time.NewTicker(t.cfg.StatusEvery)
	defer tick.Stop()
	for {
		s := status()
		t.rates.mark(time.Now(), s)
		t.rates.fill(&s)
		t.mu.Lock()
		rl := t.rlog
		t.mu.Unlock()
		if rl != nil && s.Applied.File != "" {
			rl.SetApplied(s.Applied)
		}
		m.update(s)
		_ = WriteStatus(t.cfg.Dir, s)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
