package grpcapi_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	pb "github.com/dtm-labs/dtm/client/dtmgrpc/dtmgpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/grpcapi"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// TestGRPCSaga: a saga submitted through dtm's gRPC API (dtm's own
// generated client) calls its branches over gRPC with dtm's metadata; a
// branch's FAILURE rolls it back, and the wait_result submit answers
// Aborted with the business's reason, as dtm does.
func TestGRPCSaga(t *testing.T) {
	cfg := dtxtest.FastConfig()
	coord, err := dtx.New(cfg, memstore.New(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpcapi.New(coord)
	go gs.Serve(ln) //nolint:errcheck // ends with Stop
	defer gs.Stop()
	busi, err := dtxtest.Start(nil, dtxtest.Config{NoDB: true})
	if err != nil {
		t.Fatal(err)
	}
	defer busi.Close()
	baddr, err := busi.ServeGRPC()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewDtmClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	gid, err := client.NewGid(ctx, &emptypb.Empty{})
	if err != nil || gid.Gid == "" {
		t.Fatalf("NewGid: %v %v", gid, err)
	}
	saga := func(gid string, req dtxtest.Req) error {
		p, _ := json.Marshal(req)
		u := baddr + "/" + dtxtest.GRPCService
		steps, _ := json.Marshal([]map[string]string{
			{"action": u + "/TransOut", "compensate": u + "/TransOutCompensate"},
			{"action": u + "/TransIn", "compensate": u + "/TransInCompensate"},
		})
		_, err := client.Submit(ctx, &pb.DtmRequest{Gid: gid, TransType: "saga", Steps: string(steps),
			BinPayloads: [][]byte{p, p}, TransOptions: &pb.DtmTransOptions{WaitResult: true}})
		return err
	}
	if err := saga(gid.Gid, dtxtest.Req{Amount: 1}); err != nil {
		t.Fatalf("saga: %v", err)
	}
	g, bs, err := coord.Query(ctx, gid.Gid)
	if err != nil || g.Status != dtx.StatusSucceed || g.Protocol != "grpc" {
		t.Fatalf("after the saga: %+v %v", g, err)
	}
	for _, b := range bs {
		if b.Op == dtx.OpAction && b.Status != dtx.StatusSucceed {
			t.Fatalf("branch %s %s is %s", b.BranchID, b.Op, b.Status)
		}
	}

	err = saga("grpc-fail", dtxtest.Req{Amount: 1, Results: map[string]string{"TransIn": "FAILURE:Insufficient balance"}})
	if st, _ := status.FromError(err); st.Code() != codes.Aborted || !strings.Contains(st.Message(), "Insufficient balance") {
		t.Fatalf("failed saga answered %v", err)
	}
	g, bs, _ = coord.Query(ctx, "grpc-fail")
	if g.Status != dtx.StatusFailed {
		t.Fatalf("failed saga is %s", g.Status)
	}
	for _, b := range bs {
		if b.BranchID == "01" && b.Op == dtx.OpCompensate && b.Status != dtx.StatusSucceed {
			t.Fatalf("TransOut was not compensated: %+v", bs)
		}
	}

	// A bad request is InvalidArgument, and nothing is stored.
	_, err = client.Submit(ctx, &pb.DtmRequest{Gid: "grpc-bad", TransType: "saga", Steps: `[{"action":"no-slash"}]`, BinPayloads: [][]byte{nil}})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Fatalf("bad URL answered %v", err)
	}
	if _, _, err := coord.Query(ctx, "grpc-bad"); err != dtx.ErrNotFound {
		t.Fatalf("bad request stored: %v", err)
	}
}
