package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	pb "github.com/dtm-labs/dtm/client/dtmgrpc/dtmgpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// TestDtxGRPCBearerToken: with a token, every gRPC call needs
// "authorization: Bearer TOKEN" metadata (Unauthenticated otherwise), as
// the HTTP API needs the header; --test-hooks refuses a non-loopback
// --grpc-listen.
func TestDtxGRPCBearerToken(t *testing.T) {
	coord, err := dtx.New(dtx.DefaultConfig(), memstore.New(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	gs, ln, err := listenDtxGRPC(coord, "127.0.0.1:0", "s3cr3t-token", false, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewDtmClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, auth := range []string{"", "Bearer wrong", "s3cr3t-token"} {
		cctx := ctx
		if auth != "" {
			cctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
		}
		if _, err := c.NewGid(cctx, &emptypb.Empty{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("authorization %q: %v, want Unauthenticated", auth, err)
		}
	}
	r, err := c.NewGid(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cr3t-token"), &emptypb.Empty{})
	if err != nil || r.Gid == "" {
		t.Fatalf("with the token: %v %v", r, err)
	}
	if _, _, err := listenDtxGRPC(coord, "0.0.0.0:0", "", true, slog.Default()); err == nil {
		t.Fatal("--test-hooks with a non-loopback --grpc-listen was accepted")
	}
}
