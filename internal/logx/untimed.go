package logx

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// NewUntimed is New without the time: "<prefix>: <msg> k=v ...". The
// binlog server (sluice serve) has always written its lines so.
func NewUntimed(w io.Writer, prefix string) *slog.Logger {
	return slog.New(untimed{New(w, prefix).Handler()})
}

// untimed clears each record's time, which the handler then leaves out.
type untimed struct{ slog.Handler }

func (u untimed) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return u.Handler.Handle(ctx, r)
}

func (u untimed) WithAttrs(as []slog.Attr) slog.Handler {
	return untimed{u.Handler.WithAttrs(as)}
}

func (u untimed) WithGroup(name string) slog.Handler { return untimed{u.Handler.WithGroup(name)} }
