package load

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPipeBlocksAndCopies: a writer that mixes Write (copied) and
// WriteBlock (handed over, then refilled from Block) through a small pipe,
// and a reader with random buffer sizes: the reader gets exactly the bytes
// written, in order, while recycled blocks go back to the writer (the race
// detector sees any buffer both sides touch).
func TestPipeBlocksAndCopies(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	p := newPipe(newBudget(1<<20), 512<<10)
	var want bytes.Buffer
	sizes := make([]int, 300)
	for i := range sizes {
		sizes[i] = r.IntN(blockSize + 100<<10) // some past a block: they grow
	}
	done := make(chan error, 1)
	go func() {
		w := rand.New(rand.NewPCG(seed, 2))
		var n byte
		for _, size := range sizes {
			b := p.Block()
			for i := 0; i < size; i++ {
				b = append(b, n)
				n++
			}
			want.Write(b)
			var err error
			if w.IntN(3) == 0 {
				_, err = p.Write(b)
			} else {
				err = p.WriteBlock(b)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- p.Commit(int64(len(sizes)))
	}()
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := p.Read(buf[:1+r.IntN(len(buf)-1)])
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("seed %d: read: %v", seed, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("seed %d: write: %v", seed, err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("seed %d: read %d bytes, wrote %d, or different bytes", seed, got.Len(), want.Len())
	}
	if rows, err := p.result(); err != nil || rows != int64(len(sizes)) {
		t.Fatalf("seed %d: result %d, %v", seed, rows, err)
	}
}
