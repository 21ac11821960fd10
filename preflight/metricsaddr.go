package preflight

import (
	"fmt"
	"net"
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/task"
)

// One home for the check of incremental.metrics-addr: its syntax
// (CheckMetricsAddr, before any run) and, in the checks, a listen on it
// too (metricsAddrCheck). They were two near-copies that disagreed: a
// named port ("127.0.0.1:http") was refused before a run and passed by
// sluice check whenever the listen succeeded.

const metricsAddrFix = "set incremental.metrics-addr to a loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port"

// CheckMetricsAddr refuses an incremental.metrics-addr that no listen can
// take before the run starts: it was found only when replication began,
// after --mode all had copied every table (issue 30).
func CheckMetricsAddr(cfg *task.Config) error {
	a := cfg.Incremental.MetricsAddr
	if a == "" {
		return nil
	}
	if err := metricsAddrSyntax(a); err != nil {
		return sluice.Errorf(sluice.ErrConfig, "task file", metricsAddrFix, "incremental.metrics-addr %q: %v", a, err)
	}
	return nil
}

// metricsAddrSyntax: host:port with a numeric port in range.
func metricsAddrSyntax(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	if n < 0 || n > 65535 {
		return fmt.Errorf("port %d out of range", n)
	}
	return nil
}

// metricsAddrCheck checks the syntax as CheckMetricsAddr does, then binds
// incremental.metrics-addr and lets it go: a bad or busy address was found
// only when replication started, after the whole copy, and the copy itself
// served no metrics in silence.
func metricsAddrCheck(cfg *task.Config) Result {
	r := Result{Name: "metrics-addr"}
	addr := cfg.Incremental.MetricsAddr
	if addr == "" {
		r.Status, r.Detail = "pass", "no metrics endpoint (incremental.metrics-addr is empty)"
		return r
	}
	if err := CheckMetricsAddr(cfg); err != nil {
		return errResult(r.Name, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.Status = "fail"
		r.Detail = fmt.Sprintf("incremental.metrics-addr %q cannot be served: %v", addr, err)
		r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, r.Detail)
		r.Fix = "set incremental.metrics-addr to a free loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port (or stop what listens there)"
		return r
	}
	ln.Close()
	r.Status, r.Detail = "pass", "can listen on "+addr
	return r
}
