package load

import (
	"errors"
	"io"
	"sync"
)

// errAborted is what a loader reads when the dump side gave up on a chunk.
var errAborted = errors.New("chunk aborted by the dump side")

// Pipe carries one streamed chunk from a dump worker to a loader. Unlike
// io.Pipe it buffers up to a limit, so a dump worker can finish a chunk and
// move on while loaders are busy; only past the limit does it wait.
type Pipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	bufs   [][]byte
	size   int
	limit  int
	closed bool  // the writer called Commit or Abort
	werr   error // set by Abort
	rerr   error // set when the reader side is gone
	rows   int64
	head   []byte
}

func newPipe(limit int) *Pipe {
	p := &Pipe{limit: limit}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Write copies b into the pipe, waiting while the pipe is over its limit.
func (p *Pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.size >= p.limit && p.rerr == nil {
		p.cond.Wait()
	}
	if p.rerr != nil {
		return 0, p.rerr
	}
	if p.closed {
		return 0, errors.New("write to a finished chunk")
	}
	p.bufs = append(p.bufs, append([]byte(nil), b...))
	p.size += len(b)
	p.cond.Broadcast()
	return len(b), nil
}

// Commit ends the chunk: rows is the number of rows the writer sent.
func (p *Pipe) Commit(rows int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr != nil {
		return p.rerr
	}
	p.closed, p.rows = true, rows
	p.cond.Broadcast()
	return nil
}

// Abort ends the chunk with an error; the loader rolls it back.
func (p *Pipe) Abort(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		err = errAborted
	}
	p.closed, p.werr = true, err
	p.cond.Broadcast()
}

// Read implements io.Reader for the loader.
func (p *Pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.head) == 0 {
		if p.rerr != nil {
			return 0, p.rerr
		}
		if len(p.bufs) > 0 {
			p.head, p.bufs = p.bufs[0], p.bufs[1:]
			break
		}
		if p.closed {
			if p.werr != nil {
				return 0, errors.Join(errAborted, p.werr)
			}
			return 0, io.EOF
		}
		p.cond.Wait()
	}
	n := copy(b, p.head)
	p.head = p.head[n:]
	p.size -= n
	p.cond.Broadcast()
	return n, nil
}

// closeRead ends the pipe from the reader side: a waiting or later Write
// fails with err.
func (p *Pipe) closeRead(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.cond.Broadcast()
}

// result is the writer's outcome once the reader saw EOF.
func (p *Pipe) result() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		return 0, errors.New("chunk stream ended before the dump side finished it")
	}
	if p.werr != nil {
		return 0, p.werr
	}
	return p.rows, nil
}
