// Package logx is sluice's one log format: a *slog.Logger whose lines read
// "<UTC time, RFC 3339 to the second> <prefix>: <message>", with attributes
// appended as " key=value". Operators and tests grep these lines, so the
// format is the one the task logs had before slog.
package logx

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// TimeFormat is the time of a log line (RFC 3339, seconds, UTC).
const TimeFormat = "2006-01-02T15:04:05Z"

// New returns a logger that writes one plain line per record to w. An empty
// prefix leaves out the "<prefix>: " part.
func New(w io.Writer, prefix string) *slog.Logger {
	return slog.New(&handler{out: &output{w: w}, prefix: prefix})
}

// Discard is a logger that writes nothing, for callers that give none.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OrDiscard returns l, or Discard when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

// output serializes writes: loggers derived with With share one.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

type handler struct {
	out    *output
	prefix string
	attrs  string // pre-rendered " k=v" of With
	group  string
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	var b strings.Builder
	b.WriteString(t.UTC().Format(TimeFormat))
	b.WriteByte(' ')
	if h.prefix != "" {
		b.WriteString(h.prefix)
		b.WriteString(": ")
	}
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := io.WriteString(h.out.w, b.String())
	return err
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range as {
		writeAttr(&b, h.group, a)
	}
	h2 := *h
	h2.attrs += b.String()
	return &h2
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.group += name + "."
	return &h2
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			writeAttr(b, group+a.Key+".", g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(group + a.Key)
	b.WriteByte('=')
	b.WriteString(a.Value.String())
}
