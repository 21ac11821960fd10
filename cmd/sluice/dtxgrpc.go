package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/grpcapi"
)

// listenDtxGRPC opens --grpc-listen and builds dtm's gRPC service on it,
// guarded like the HTTP API: the bearer token when there is one (in the
// authorization metadata), test hooks on loopback only.
func listenDtxGRPC(coord *dtx.Coordinator, addr, token string, testHooks bool, log *slog.Logger) (*grpc.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, &sluice.Error{Op: "dtx serve: listen on " + addr, Err: err, Hint: "pick a free address with --grpc-listen"}
	}
	if testHooks && !loopbackAddr(ln.Addr()) {
		ln.Close()
		return nil, nil, &sluice.Error{Op: "dtx serve", Err: fmt.Errorf("%w: --test-hooks with --grpc-listen %s, which is not a loopback address", sluice.ErrConfig, ln.Addr()), Hint: "--test-hooks is for dtm's test suite on this machine: listen on 127.0.0.1"}
	}
	if token == "" && !loopbackAddr(ln.Addr()) {
		log.Warn("dtx: serving gRPC on a non-loopback address without --token-file: anyone who reaches it can submit and abort transactions and make sluice call any service", "grpc-listen", ln.Addr().String())
	}
	var opts []grpc.ServerOption
	if token != "" {
		opts = append(opts, grpc.UnaryInterceptor(grpcBearer(token)))
	}
	return grpcapi.New(coord, opts...), ln, nil
}

// grpcBearer requires "authorization: Bearer TOKEN" metadata on every call.
func grpcBearer(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		var got string
		if v := md.Get("authorization"); len(v) > 0 {
			got = v[0]
		}
		if !bearerMatches(got, token) {
			return nil, status.Error(codes.Unauthenticated, "missing or wrong bearer token")
		}
		return handler(ctx, req)
	}
}
