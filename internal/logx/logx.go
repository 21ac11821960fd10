// Package logx renders sluice's log lines: the *slog.Logger that cmd/sluice
// makes and passes down to the packages it runs writes plain lines, one a
// record,
//
//	2026-11-28T09:24:14Z replicate dt2812: stopped at mysql-bin.000003:1234
//
// the time in UTC to the second (RFC 3339), a prefix naming who speaks, the
// message, and the record's attributes appended as key=value. Users, the
// difftest and the tests read these lines, so their text is kept as it was
// before the packages logged through slog.
package logx

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// New returns a logger that writes each record to w as one line:
// "<time> <prefix>: <msg> k=v ...". Records of every level are written.
func New(w io.Writer, prefix string) *slog.Logger {
	return slog.New(&handler{out: &output{w: w}, prefix: prefix})
}

// output is the writer shared by a handler and those WithAttrs and
// WithGroup derive from it, so that their lines never interleave.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

type handler struct {
	out    *output
	prefix string
	attrs  []byte // pre-rendered " k=v" of WithAttrs
	group  string // key prefix of WithGroup, "g." or "g.h."
}

func (h *handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	if !r.Time.IsZero() { // the slog.Handler contract: a zero time is left out
		b.WriteString(r.Time.UTC().Format(time.RFC3339))
		b.WriteByte(' ')
	}
	b.WriteString(h.prefix)
	b.WriteString(": ")
	b.WriteString(r.Message)
	b.Write(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(b.Bytes())
	return err
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b bytes.Buffer
	b.Write(h.attrs)
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	h2 := *h
	h2.attrs = b.Bytes()
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

// appendAttr writes " key=value"; a group's attributes are written with
// the group's name before their keys.
func appendAttr(b *bytes.Buffer, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			appendAttr(b, g, ga)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(group)
	b.WriteString(a.Key)
	b.WriteByte('=')
	b.WriteString(a.Value.String())
}
