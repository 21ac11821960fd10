package dtxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/httpapi"
)

// FastConfig is a coordinator config with short timers, for tests.
func FastConfig() dtx.Config {
	c := dtx.DefaultConfig()
	c.RequestTimeout = time.Second
	c.RetryInterval = 200 * time.Millisecond
	c.MaxBackoff = time.Second
	c.TimeoutToFail = 2 * time.Second
	c.Lease = 3 * time.Second
	c.PollInterval = 100 * time.Millisecond
	c.CommitWorkers = 2
	return c
}

// Server is an in-process coordinator serving dtm's HTTP protocol.
type Server struct {
	Coord *dtx.Coordinator
	Reg   *prometheus.Registry
	// URL is what dtm's client takes as its server: http://ADDR/api/dtmsvr.
	URL string
	srv *httpapi.Server
	wg  sync.WaitGroup
}

// Serve starts a coordinator on store and serves it on a free loopback port.
func Serve(cfg dtx.Config, store dtx.Store) (*Server, error) {
	reg := prometheus.NewRegistry()
	c, err := dtx.New(cfg, store, reg, nil)
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		c.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &Server{Coord: c, Reg: reg, URL: "http://" + ln.Addr().String() + "/api/dtmsvr"}
	// As sluice dtx serve does: dtm client's plain calls by the lean loop,
	// everything else by net/http.
	h := httpapi.Handler(c, reg)
	s.srv = httpapi.NewServer(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, h)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops serving and the coordinator (the store stays open).
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.wg.Wait()
	s.Coord.Close()
}

// QueryResult is the body of GET /api/dtmsvr/query.
type QueryResult struct {
	Transaction *struct {
		Gid            string `json:"gid"`
		Status         string `json:"status"`
		TransType      string `json:"trans_type"`
		RollbackReason string `json:"rollback_reason"`
		Stuck          string `json:"stuck"`
		Retries        int    `json:"retries"`
		// NextCronTime is when recovery looks at it next.
		NextCronTime *time.Time `json:"next_cron_time"`
	} `json:"transaction"`
	Branches []struct {
		BranchID string `json:"branch_id"`
		Op       string `json:"op"`
		Status   string `json:"status"`
		URL      string `json:"url"`
	} `json:"branches"`
}

// Query asks a coordinator (base URL ending in /api/dtmsvr) about gid.
func Query(ctx context.Context, base, gid string) (*QueryResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/query?gid="+url.QueryEscape(gid), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query %s: HTTP %d", gid, resp.StatusCode)
	}
	var q QueryResult
	return &q, json.NewDecoder(resp.Body).Decode(&q)
}

// Status is the transaction's status, "" when it is not stored.
func (q *QueryResult) Status() string {
	if q.Transaction == nil {
		return ""
	}
	return q.Transaction.Status
}

// WaitStatus polls until gid has one of the statuses or the time is up,
// and returns the last answer.
func WaitStatus(ctx context.Context, base, gid string, within time.Duration, want ...string) (*QueryResult, error) {
	deadline := time.Now().Add(within)
	for {
		q, err := Query(ctx, base, gid)
		if err == nil {
			for _, w := range want {
				if q.Status() == w {
					return q, nil
				}
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, err
			}
			return q, fmt.Errorf("gid %s: status %q after %v, want %v", gid, q.Status(), within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
