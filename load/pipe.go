package load

import (
	"errors"
	"io"
	"sync"
)

// blocks recycles the pipes' buffers: a migration moves gigabytes through
// them, and fresh slices would leave the garbage collector to bound memory.
var blocks sync.Pool

const blockSize = 320 << 10

func getBlock(n int) []byte {
	if n <= blockSize {
		if b, ok := blocks.Get().(*[]byte); ok {
			return (*b)[:0]
		}
		return make([]byte, 0, blockSize)
	}
	return make([]byte, 0, n)
}

func putBlock(b []byte) {
	if cap(b) == blockSize {
		b = b[:0]
		blocks.Put(&b)
	}
}

// errAborted is what a loader reads when the dump side gave up on a chunk.
var errAborted = errors.New("chunk aborted by the dump side")

// budget bounds the bytes buffered by all pipes of a loader together. All
// pipes share its mutex and condition, so freeing room in one pipe wakes
// writers waiting on any.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	used int
	max  int
}

func newBudget(max int) *budget {
	b := &budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Pipe carries one streamed chunk from a dump worker to a loader. Unlike
// io.Pipe it buffers, so a dump worker can finish a chunk and move on while
// loaders are busy. A writer waits when its pipe holds limit bytes, or when
// nobody reads the pipe yet and all pipes together hold the budget's max: a
// pipe that is being read can always fill up to its own limit, so the
// loader in front of it never waits on chunks queued behind it.
type Pipe struct {
	b       *budget
	bufs    [][]byte
	reading bool
	size    int
	limit   int
	closed  bool  // the writer called Commit or Abort
	werr    error // set by Abort
	rerr    error // set when the reader side is gone
	rows    int64
	head    []byte
	block   []byte // the pooled buffer head points into
}

func newPipe(b *budget, limit int) *Pipe {
	return &Pipe{b: b, limit: limit}
}

// Write copies b into the pipe, waiting while the pipe is over its limit.
func (p *Pipe) Write(b []byte) (int, error) {
	if err := p.put(b, true); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Block returns an empty buffer for the writer to fill and hand over with
// WriteBlock.
func (p *Pipe) Block() []byte { return getBlock(0) }

// WriteBlock hands b over to the pipe, as Write would copy it: the rows
// reach the loader without another copy. The caller must not use b again
// (Block gives the next buffer).
func (p *Pipe) WriteBlock(b []byte) error { return p.put(b, false) }

// put waits while the pipe is over its limit, then queues b, or a copy of
// it when the writer keeps b.
func (p *Pipe) put(b []byte, copied bool) error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	for (p.size >= p.limit || !p.reading && p.b.used >= p.b.max) && p.rerr == nil {
		p.b.cond.Wait()
	}
	if p.rerr != nil {
		return p.rerr
	}
	if p.closed {
		return errors.New("write to a finished chunk")
	}
	if copied {
		b = append(getBlock(len(b)), b...)
	}
	p.bufs = append(p.bufs, b)
	p.size += len(b)
	p.b.used += len(b)
	p.b.cond.Broadcast()
	return nil
}

// Commit ends the chunk: rows is the number of rows the writer sent.
func (p *Pipe) Commit(rows int64) error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.rerr != nil {
		return p.rerr
	}
	p.closed, p.rows = true, rows
	p.b.cond.Broadcast()
	return nil
}

// Abort ends the chunk with an error; the loader rolls it back.
func (p *Pipe) Abort(err error) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if err == nil {
		err = errAborted
	}
	p.closed, p.werr = true, err
	p.b.cond.Broadcast()
}

// Read implements io.Reader for the loader.
func (p *Pipe) Read(b []byte) (int, error) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if !p.reading {
		p.reading = true
		p.b.cond.Broadcast()
	}
	for len(p.head) == 0 {
		if p.block != nil {
			putBlock(p.block)
			p.block = nil
		}
		if p.rerr != nil {
			return 0, p.rerr
		}
		if len(p.bufs) > 0 {
			p.head, p.bufs = p.bufs[0], p.bufs[1:]
			p.block = p.head
			break
		}
		if p.closed {
			if p.werr != nil {
				return 0, errors.Join(errAborted, p.werr)
			}
			return 0, io.EOF
		}
		p.b.cond.Wait()
	}
	n := copy(b, p.head)
	p.head = p.head[n:]
	p.size -= n
	p.b.used -= n
	p.b.cond.Broadcast()
	return n, nil
}

// closeRead ends the pipe from the reader side: a waiting or later Write
// fails with err.
func (p *Pipe) closeRead(err error) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
		// Nobody will read what is left: give its room back.
		p.b.used -= p.size
		p.size, p.bufs, p.head = 0, nil, nil
	}
	p.b.cond.Broadcast()
}

// result is the writer's outcome once the reader saw EOF.
func (p *Pipe) result() (int64, error) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if !p.closed {
		return 0, errors.New("chunk stream ended before the dump side finished it")
	}
	if p.werr != nil {
		return 0, p.werr
	}
	return p.rows, nil
}
