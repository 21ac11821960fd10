// Package grpcapi serves dtm's gRPC API (the dtmgimp.Dtm service, from
// dtm's published proto definitions) on a coordinator, so that dtm's gRPC
// clients (dtmgrpc: saga, TCC, messages, XA, workflow) work unchanged.
package grpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"

	pb "github.com/dtm-labs/dtm/client/dtmgrpc/dtmgpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluice-db/sluice/dtx"
)

// Server implements pb.DtmServer on a coordinator.
type Server struct {
	pb.UnimplementedDtmServer
	c *dtx.Coordinator
}

// New returns a gRPC server with the Dtm service registered on c.
// Every call runs under recoverUnary: a panic in one call answers that
// call Internal and is logged; it never ends the process.
func New(c *dtx.Coordinator, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.ChainUnaryInterceptor(recoverUnary(c.Log())))
	gs := grpc.NewServer(opts...)
	pb.RegisterDtmServer(gs, &Server{c: c})
	return gs
}

// Serve serves on ln until gs stops.
func Serve(gs *grpc.Server, ln net.Listener) error { return gs.Serve(ln) }

// toStatus maps the coordinator's errors as dtm's DtmError2GrpcError does
// (FAILURE is Aborted, ONGOING FailedPrecondition) and the rest by kind.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dtx.ErrFailure):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, dtx.ErrOngoing):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, dtx.ErrBadRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, dtx.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// request converts a DtmRequest as dtm's TransFromDtmRequest does.
func request(in *pb.DtmRequest) (*dtx.Request, error) {
	r := &dtx.Request{
		Gid:            in.Gid,
		TransType:      in.TransType,
		CustomData:     in.CustomedData,
		QueryPrepared:  in.QueryPrepared,
		Protocol:       "grpc",
		RollbackReason: in.RollbackReason,
		ReqExtra:       in.ReqExtra,
	}
	if o := in.TransOptions; o != nil {
		r.WaitResult, r.TimeoutToFail, r.RetryInterval = o.WaitResult, o.TimeoutToFail, o.RetryInterval
		r.BranchHeaders, r.RequestTimeout, r.RetryLimit = o.BranchHeaders, o.RequestTimeout, o.RetryLimit
	}
	if len(in.BinPayloads) > 0 {
		r.Payloads = make([]string, len(in.BinPayloads))
		for i, p := range in.BinPayloads {
			r.Payloads[i] = string(p)
		}
	}
	if in.Steps != "" {
		if err := json.Unmarshal([]byte(in.Steps), &r.Steps); err != nil {
			return nil, fmt.Errorf("%w: Steps is not a JSON array of objects of strings: %v", dtx.ErrBadRequest, err)
		}
	}
	return r, r.Check()
}

func (s *Server) trans(ctx context.Context, in *pb.DtmRequest, fn func(context.Context, *dtx.Request) error) (*emptypb.Empty, error) {
	r, err := request(in)
	if err == nil {
		err = fn(ctx, r)
	}
	return &emptypb.Empty{}, toStatus(err)
}

// NewGid implements pb.DtmServer.
func (s *Server) NewGid(ctx context.Context, _ *emptypb.Empty) (*pb.DtmGidReply, error) {
	return &pb.DtmGidReply{Gid: s.c.NewGid()}, nil
}

// Submit implements pb.DtmServer.
func (s *Server) Submit(ctx context.Context, in *pb.DtmRequest) (*emptypb.Empty, error) {
	return s.trans(ctx, in, s.c.Submit)
}

// Prepare implements pb.DtmServer.
func (s *Server) Prepare(ctx context.Context, in *pb.DtmRequest) (*emptypb.Empty, error) {
	return s.trans(ctx, in, s.c.Prepare)
}

// Abort implements pb.DtmServer.
func (s *Server) Abort(ctx context.Context, in *pb.DtmRequest) (*emptypb.Empty, error) {
	return s.trans(ctx, in, s.c.Abort)
}

// RegisterBranch implements pb.DtmServer: the branch's payload comes as
// bytes beside dtm's data map.
func (s *Server) RegisterBranch(ctx context.Context, in *pb.DtmBranchRequest) (*emptypb.Empty, error) {
	fields := make(map[string]string, len(in.Data)+4)
	for k, v := range in.Data {
		fields[k] = v
	}
	fields["gid"], fields["trans_type"], fields["branch_id"], fields["data"] = in.Gid, in.TransType, in.BranchID, string(in.BusiPayload)
	if in.Op != "" && fields["op"] == "" {
		fields["op"] = in.Op
	}
	fields["protocol"] = "grpc"
	return &emptypb.Empty{}, toStatus(s.c.RegisterBranch(ctx, fields))
}

// PrepareWorkflow implements pb.DtmServer.
func (s *Server) PrepareWorkflow(ctx context.Context, in *pb.DtmRequest) (*pb.DtmProgressesReply, error) {
	r, err := request(in)
	if err != nil {
		return nil, toStatus(err)
	}
	g, bs, err := s.c.PrepareWorkflow(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	reply := &pb.DtmProgressesReply{
		Transaction: &pb.DtmTransaction{Gid: g.Gid, Status: g.Status, RollbackReason: g.RollbackReason, Result: g.Result},
		Progresses:  make([]*pb.DtmProgress, 0, len(bs)),
	}
	for _, b := range bs {
		reply.Progresses = append(reply.Progresses, &pb.DtmProgress{Status: b.Status, BranchID: b.BranchID, Op: b.Op, BinData: b.BinData})
	}
	return reply, nil
}

// Subscribe implements pb.DtmServer.
func (s *Server) Subscribe(ctx context.Context, in *pb.DtmTopicRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, toStatus(s.c.Subscribe(ctx, in.Topic, in.URL, in.Remark))
}

// Unsubscribe implements pb.DtmServer.
func (s *Server) Unsubscribe(ctx context.Context, in *pb.DtmTopicRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, toStatus(s.c.Unsubscribe(ctx, in.Topic, in.URL))
}

// DeleteTopic implements pb.DtmServer.
func (s *Server) DeleteTopic(ctx context.Context, in *pb.DtmTopicRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, toStatus(s.c.DeleteTopic(ctx, in.Topic))
}

// recoverUnary turns a panic in a unary handler into codes.Internal.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				if log == nil {
					log = slog.Default()
				}
				log.Error("dtx: a gRPC handler panicked; answered Internal", "method", info.FullMethod, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, "internal error in sluice dtx (logged); please report it")
			}
		}()
		return handler(ctx, req)
	}
}
