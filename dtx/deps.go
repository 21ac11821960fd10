package dtx

import (
	"time"

	"github.com/sluice-db/sluice/dtx/internal/wire"
	"github.com/sluice-db/sluice/internal/procstat"
)

// HostLoad tells the commit wait how busy the host's CPUs are: waiting for
// company trades latency for CPU, which pays only when CPU is scarce
// (procstat.Busy reads /proc/stat). A test gives a fixed load instead.
type HostLoad interface {
	// Load is the recent busy share, 0..1; 1 when not known.
	Load() float64
	// Run samples every interval until done is closed, and then returns.
	Run(done <-chan struct{}, interval time.Duration)
}

// Option replaces one of the coordinator's collaborators, for tests.
type Option func(*Coordinator)

// WithCaller makes the coordinator call branches through caller instead
// of its transport (HTTP, gRPC and JSON-RPC clients): wire.Fake answers
// from memory, so that the state machine is tested without a network.
func WithCaller(caller wire.Caller) Option {
	return func(c *Coordinator) { c.caller = caller }
}

// WithHostLoad gives the commit wait another measure of the host's load.
func WithHostLoad(l HostLoad) Option {
	return func(c *Coordinator) { c.cpu = l }
}

var _ HostLoad = (*procstat.Busy)(nil)
