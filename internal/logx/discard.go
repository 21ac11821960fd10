package logx

import "log/slog"

// OrDiscard returns l, or a logger that writes nothing when l is nil, for
// the packages whose Config leaves the logger optional.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
