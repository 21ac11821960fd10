package main

import (
	"context"
	"encoding/json"

	pb "github.com/dtm-labs/dtm/client/dtmgrpc/dtmgpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-db/sluice/dtx/dtxtest"
)

// rawCodec sends a message's bytes as they are, as dtm's clients call
// gRPC branches: the business service takes the same JSON as over HTTP.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "dtm_raw" }

func (b *bench) setGRPC(name, addr string) {
	if b.grpcAddrs == nil {
		b.grpcAddrs = map[string]string{}
	}
	b.grpcAddrs[name] = addr
}

// conn is one client connection per address for the whole run: gRPC
// multiplexes every client's calls on it, as a dtm gRPC client does.
func (b *bench) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := b.grpcConns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	if b.grpcConns == nil {
		b.grpcConns = map[string]*grpc.ClientConn{}
	}
	b.grpcConns[addr] = c
	return c, nil
}

// grpcLoad is a gRPC row's transaction: with a coordinator, the saga
// submitted through dtm's gRPC API (wait_result) with gRPC branches;
// without one, TransOut then TransIn called directly over gRPC.
func (b *bench) grpcLoad(busi *dtxtest.Busi, coordinator string) (func(context.Context) error, error) {
	baddr, err := busi.ServeGRPC()
	if err != nil {
		return nil, err
	}
	bconn, err := b.conn(baddr)
	if err != nil {
		return nil, err
	}
	u := baddr + "/" + dtxtest.GRPCService
	if coordinator == "" {
		return func(ctx context.Context) error {
			p := payload()
			var reply []byte
			if err := bconn.Invoke(ctx, "/"+dtxtest.GRPCService+"/TransOut", p, &reply, grpc.ForceCodec(rawCodec{})); err != nil {
				return err
			}
			return bconn.Invoke(ctx, "/"+dtxtest.GRPCService+"/TransIn", p, &reply, grpc.ForceCodec(rawCodec{}))
		}, nil
	}
	cconn, err := b.conn(b.grpcAddrs[coordinator])
	if err != nil {
		return nil, err
	}
	client := pb.NewDtmClient(cconn)
	steps, _ := json.Marshal([]map[string]string{
		{"action": u + "/TransOut", "compensate": u + "/TransOutCompensate"},
		{"action": u + "/TransIn", "compensate": u + "/TransInCompensate"},
	})
	return func(ctx context.Context) error {
		p := payload()
		_, err := client.Submit(ctx, &pb.DtmRequest{Gid: newGid(), TransType: "saga", Steps: string(steps),
			BinPayloads: [][]byte{p, p}, TransOptions: &pb.DtmTransOptions{WaitResult: true}})
		return err
	}, nil
}
