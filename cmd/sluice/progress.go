package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice/load"
	"golang.org/x/term"
)

// progressPhase is one line of progress: a named stage and its counters.
// The funcs are called from the display goroutine, so they must be safe to
// call concurrently with the work (atomic loads).
type progressPhase struct {
	Name        string
	Rows, Bytes func() int64
	// Done and Total count units of work (chunks) for the percentage and
	// the ETA; Total 0 means unknown.
	Done, Total func() int64
}

// loadPhase is the load's progress line: committed rows and chunks plus
// those a whole-table load has streamed and not committed yet, so that a
// table loaded in one transaction (commit unit table, the default for
// small tables) moves the line and its ETA while it streams.
func loadPhase(ls *load.Stats) progressPhase {
	return progressPhase{Name: "load",
		Rows:  func() int64 { return ls.Rows.Load() + ls.InFlightRows.Load() },
		Bytes: ls.Bytes.Load,
		Done:  func() int64 { return ls.Chunks.Load() + ls.InFlightChunks.Load() },
		Total: ls.TotalChunks.Load}
}

// progress shows phases as bars redrawn in place on a terminal, and as a
// plain line every PlainEvery otherwise (logs, pipes, CI).
type progress struct {
	out    io.Writer
	tty    bool
	phases []progressPhase
	start  time.Time
	every  time.Duration
	stop   chan struct{}
	wg     sync.WaitGroup
	drawn  int
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startProgress starts the display; Stop ends it and prints a final state.
func startProgress(out io.Writer, plainEvery time.Duration, phases ...progressPhase) *progress {
	p := &progress{out: out, tty: isTerminal(out), phases: phases, start: time.Now(), every: plainEvery, stop: make(chan struct{})}
	if p.every <= 0 {
		p.every = 10 * time.Second
	}
	interval := p.every
	if p.tty {
		interval = 250 * time.Millisecond
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// Stop ends the display and draws the final state once more.
func (p *progress) Stop() {
	close(p.stop)
	p.wg.Wait()
	p.draw()
	if p.tty {
		fmt.Fprintln(p.out)
	}
}

func (p *progress) draw() {
	elapsed := time.Since(p.start)
	if !p.tty {
		parts := make([]string, len(p.phases))
		for i, ph := range p.phases {
			parts[i] = phaseText(ph, elapsed)
		}
		fmt.Fprintf(p.out, "progress %s: %s\n", elapsed.Round(time.Second), strings.Join(parts, " | "))
		return
	}
	var b strings.Builder
	// Move back to the first line of the previous drawing and overwrite it.
	if p.drawn > 1 {
		fmt.Fprintf(&b, "\033[%dA", p.drawn-1)
	}
	width := termWidth(p.out)
	for i, ph := range p.phases {
		b.WriteString("\r\033[K")
		b.WriteString(fitLine(bar(ph, 12)+" "+phaseText(ph, elapsed), width))
		if i < len(p.phases)-1 {
			b.WriteString("\n")
		}
	}
	p.drawn = len(p.phases)
	io.WriteString(p.out, b.String())
}

func bar(ph progressPhase, width int) string {
	frac := fraction(ph)
	if frac < 0 {
		return "[" + strings.Repeat("?", width) + "]"
	}
	n := int(frac * float64(width))
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

func fraction(ph progressPhase) float64 {
	if ph.Total == nil || ph.Done == nil {
		return -1
	}
	t := ph.Total()
	if t <= 0 {
		return -1
	}
	f := float64(ph.Done()) / float64(t)
	if f > 1 {
		f = 1
	}
	return f
}

func phaseText(ph progressPhase, elapsed time.Duration) string {
	rows, bytes := ph.Rows(), ph.Bytes()
	mbs := 0.0
	if s := elapsed.Seconds(); s > 0 {
		mbs = float64(bytes) / 1e6 / s
	}
	s := fmt.Sprintf("%-5s %10d rows %8.1f MB %6.1f MB/s", ph.Name, rows, float64(bytes)/1e6, mbs)
	if f := fraction(ph); f >= 0 {
		s += fmt.Sprintf(" %3.0f%%", f*100)
		if f > 0 && f < 1 {
			eta := time.Duration(float64(elapsed) * (1 - f) / f)
			s += " ETA " + eta.Round(time.Second).String()
		}
	}
	return s
}

// termWidth is the terminal's width in columns (80 when unknown). A line
// longer than the terminal wraps, and redrawing in place then scrolls
// garbage up the screen.
func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// fitLine cuts s to fit a line of width columns (with the last column free,
// where some terminals wrap).
func fitLine(s string, width int) string {
	if r := []rune(s); len(r) > width-1 && width > 1 {
		return string(r[:width-1])
	}
	return s
}
