package dtxtest

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-db/sluice/dtx/internal/wire"
)

// GRPCService is the gRPC service name of the branches: a branch URL is
// GRPCAddr + "/" + GRPCService + "/TransOut".
const GRPCService = "busi.Busi"

// ServeGRPC serves the branches over gRPC too, as dtm's busi does on
// its gRPC port: /busi.Busi/TransOut and the rest, with dtm's metadata
// (dtm-gid, dtm-trans_type, dtm-branch_id, dtm-op) in place of the query.
// FAILURE is codes.Aborted and ONGOING codes.FailedPrecondition, as dtm's
// gRPC branches answer. It returns the address; Close stops it.
func (b *Busi) ServeGRPC() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	// Messages pass as their bytes: the branches take the same JSON Req
	// over gRPC as over HTTP.
	gs := grpc.NewServer(grpc.ForceServerCodec(wire.RawCodec{}), grpc.UnknownServiceHandler(b.grpcBranch))
	b.grpc = gs
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = gs.Serve(ln)
	}()
	return ln.Addr().String(), nil
}

func (b *Busi) grpcBranch(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	name, ok := strings.CutPrefix(method, "/"+GRPCService+"/")
	e, known := effects[name]
	if !ok || !known {
		return status.Errorf(codes.Unimplemented, "no branch %s", method)
	}
	var body []byte
	if err := stream.RecvMsg(&body); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	q := url.Values{}
	for _, k := range []string{"gid", "trans_type", "branch_id", "op"} {
		if v := md.Get("dtm-" + k); len(v) > 0 {
			q.Set(k, v[0])
		}
	}
	code, msg, reason := b.exec(stream.Context(), name, e, body, q)
	switch {
	case reason != "":
		return status.Error(codes.Aborted, reason)
	case code == http.StatusOK:
		empty := []byte{}
		return stream.SendMsg(&empty)
	case code == http.StatusConflict:
		return status.Error(codes.Aborted, msg)
	case code == http.StatusTooEarly:
		return status.Error(codes.FailedPrecondition, msg)
	case code == 0:
		return stream.Context().Err()
	}
	return status.Error(codes.Internal, msg)
}
