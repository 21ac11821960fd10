package preflight

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/task"
)

// TestMetricsAddrOneCheck: the check before a run (CheckMetricsAddr) and
// sluice check's (metricsAddrCheck) agree on every address; sluice check
// also refuses a busy one. A named port passed sluice check whenever the
// listen took it (as root, "127.0.0.1:http" binds port 80), while the run
// refused it.
func TestMetricsAddrOneCheck(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		addr            string
		syntaxOK, bound bool
	}{
		{"", true, true},
		{"127.0.0.1:0", true, true},
		{"127.0.0.1:http", false, false},
		{"127.0.0.1:70000", false, false},
		{"nohost:port:x", false, false},
		{"127.0.0.1", false, false},
		{busy.Addr().String(), true, false},
	} {
		cfg := &task.Config{}
		cfg.Incremental.MetricsAddr = c.addr
		early := CheckMetricsAddr(cfg)
		if (early == nil) != c.syntaxOK {
			t.Errorf("CheckMetricsAddr(%q) = %v", c.addr, early)
		}
		if early != nil && (!errors.Is(early, sluice.ErrConfig) || !strings.Contains(early.Error(), "incremental.metrics-addr")) {
			t.Errorf("CheckMetricsAddr(%q): %v is no config error naming the field", c.addr, early)
		}
		r := metricsAddrCheck(cfg)
		if (r.Status == "pass") != c.bound {
			t.Errorf("metricsAddrCheck(%q) = %s: %s", c.addr, r.Status, r.Detail)
		}
		if r.Status == "fail" && (!errors.Is(r.Err, sluice.ErrConfig) || r.Fix == "" || !strings.Contains(r.Detail, "incremental.metrics-addr")) {
			t.Errorf("metricsAddrCheck(%q): %+v lacks the class, the field or the fix", c.addr, r)
		}
	}
}
