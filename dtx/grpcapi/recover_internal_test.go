package grpcapi

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A panicking gRPC handler answers that call Internal instead of ending
// the process.
func TestPanicAnswersInternal(t *testing.T) {
	ic := recoverUnary(slog.New(slog.NewTextHandler(io.Discard, nil)))
	_, err := ic(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/dtmgimp.Dtm/Submit"}, func(context.Context, any) (any, error) {
		panic("boom")
	})
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want codes.Internal", err)
	}
}
