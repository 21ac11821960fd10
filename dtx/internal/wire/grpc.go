package wire

import (
	"context"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// RawCodec sends a message as its bytes, as dtm calls gRPC branches: a
// branch's payload is already the business's protobuf message, which the
// coordinator never decodes. It marshals []byte or *[]byte and unmarshals
// into *[]byte.
type RawCodec struct{}

// Marshal implements encoding.Codec.
func (RawCodec) Marshal(v any) ([]byte, error) {
	if p, ok := v.(*[]byte); ok {
		return *p, nil
	}
	return v.([]byte), nil
}

// Unmarshal implements encoding.Codec.
func (RawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}

// Name implements encoding.Codec.
func (RawCodec) Name() string { return "dtm_raw" }

var _ encoding.Codec = RawCodec{}

// grpcConns keeps one client connection per branch server; gRPC
// multiplexes the calls on it.
type grpcConns struct {
	policy *HostPolicy
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
}

func newGRPCConns(p *HostPolicy) *grpcConns {
	return &grpcConns{policy: p, conns: map[string]*grpc.ClientConn{}}
}

func (g *grpcConns) get(server string) (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.conns[server]; ok {
		return c, nil
	}
	// Branch servers are plain-text gRPC, as dtm's default driver dials
	// them. localhost is dtm's usual branch host; resolving it as IPv4
	// avoids a refused ::1 first on hosts where the service binds 0.0.0.0.
	target := server
	if h, p, ok := strings.Cut(server, ":"); ok && h == "localhost" {
		target = "127.0.0.1:" + p
	}
	c, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return g.policy.dialer(0)(ctx, "tcp", addr)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(RawCodec{})))
	if err != nil {
		return nil, err
	}
	g.conns[server] = c
	return c, nil
}

func (g *grpcConns) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, c := range g.conns {
		c.Close()
		delete(g.conns, k)
	}
}

// callGRPC invokes a gRPC branch with dtm's metadata (dtm-gid,
// dtm-trans_type, dtm-branch_id, dtm-op, which dtm's gRPC barrier reads)
// and the branch headers, and reads the status as dtm's
// GrpcError2DtmError does: Aborted is FAILURE (or ONGOING from dtm before
// v1.10), FailedPrecondition is ONGOING.
func (t *Transport) callGRPC(ctx context.Context, c *Call) (Answer, error) {
	server, method, err := splitGRPC(c.URL)
	if err != nil {
		return Answer{}, err
	}
	conn, err := t.grpc.get(server)
	if err != nil {
		return Answer{}, err
	}
	kv := make([]string, 0, 10+2*len(c.Headers))
	kv = append(kv, "dtm-gid", c.Gid, "dtm-trans_type", c.TransType, "dtm-branch_id", c.BranchID, "dtm-op", c.Op, "dtm-dtm", "")
	for k, v := range c.Headers {
		kv = append(kv, k, v)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var reply []byte
	err = conn.Invoke(ctx, method, c.Body, &reply)
	if err == nil {
		return Answer{Outcome: Success}, nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return Answer{}, err
	}
	switch st.Code() {
	case codes.Aborted:
		if st.Message() == Ongoing {
			return Answer{Outcome: Ongoing}, nil
		}
		return Answer{Outcome: Failure, Message: OneLine(st.Message(), 1000)}, nil
	case codes.FailedPrecondition:
		return Answer{Outcome: Ongoing}, nil
	}
	return Answer{}, err
}
