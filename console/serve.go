package console

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/serve"
)

// The binlog service page shows the replicas reading each served relay
// log: those of the serve tasks under --tasks (from their status.json,
// which has DT percentiles) and those of each --serve metrics address
// (from its Prometheus metrics).

// Replica is one dump in progress.
type Replica struct {
	serve.DumpStats
	// Rates since the dump began (the counters are per dump).
	BPS, EPS, TPS float64
}

// Service is one binlog service.
type Service struct {
	Name     string
	Dir      string // "" for a --serve address
	Addr     string
	Replicas []Replica
	Global   *replicate.GlobalStatus
	// HoldsBack names the source the global merge waits for.
	HoldsBack string
}

func replicaOf(d serve.DumpStats, now time.Time) Replica {
	r := Replica{DumpStats: d}
	if secs := now.Sub(d.Started).Seconds(); !d.Started.IsZero() && secs > 0 {
		r.BPS, r.EPS, r.TPS = float64(d.Bytes)/secs, float64(d.Events)/secs, float64(d.Txns)/secs
	}
	return r
}

func (s *Server) serveRoutes() {
	s.mux.HandleFunc("GET /serve", s.servePage)
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	ts, banners := s.scanTasks()
	var svcs []Service
	for _, t := range ts {
		if t.Status == nil || t.Status.Serve == nil {
			if t.Global == nil {
				continue
			}
		}
		sv := Service{Name: t.Name, Dir: t.Dir, Global: t.Global}
		if t.Status != nil && t.Status.Serve != nil {
			sv.Addr = t.Status.Serve.Addr
			for _, d := range t.Status.Serve.Replicas {
				sv.Replicas = append(sv.Replicas, replicaOf(d, now))
			}
		}
		if t.Global != nil {
			sv.HoldsBack = t.Global.Merge.Waiting
		}
		svcs = append(svcs, sv)
	}
	for _, addr := range s.cfg.Serve {
		ctx, cancel := s.sourceCtx(r)
		reps, err := scrapeReplicas(ctx, addr)
		cancel()
		if err != nil {
			banners = append(banners, err.Error())
			continue
		}
		svcs = append(svcs, Service{Name: addr, Addr: addr, Replicas: reps})
	}
	s.render(w, "serve", page{Title: "Binlog service", Nav: "serve", Banners: banners, Data: svcs})
}

// scrapeReplicas reads the per-dump series of a binlog service's metrics
// (sluice_serve_replica_*, serve/stats.go).
func scrapeReplicas(ctx context.Context, addr string) ([]Replica, error) {
	u := addr
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if !strings.HasSuffix(u, "/metrics") {
		u = strings.TrimRight(u, "/") + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("binlog service %s unreachable: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("binlog service %s: GET /metrics: HTTP %d", addr, resp.StatusCode)
	}
	byConn := map[string]*serve.DumpStats{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sluice_serve_replica_") {
			continue
		}
		name, labels, val, ok := parseSample(line)
		if !ok {
			continue
		}
		d := byConn[labels["connection"]]
		if d == nil {
			d = &serve.DumpStats{}
			id, _ := strconv.ParseUint(labels["server_id"], 10, 32)
			c, _ := strconv.ParseUint(labels["connection"], 10, 32)
			d.ServerID, d.ConnID = uint32(id), uint32(c)
			byConn[labels["connection"]] = d
		}
		switch strings.TrimPrefix(name, "sluice_serve_replica_") {
		case "events_sent_total":
			d.Events = uint64(val)
		case "bytes_sent_total":
			d.Bytes = uint64(val)
		case "transactions_sent_total":
			d.Txns = uint64(val)
		case "lag_seconds":
			d.LagSeconds = val
		case "binlog_file_seq":
			d.File = fmt.Sprintf("seq %06d", int64(val))
		case "binlog_offset":
			d.Pos = uint32(val)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("binlog service %s: read /metrics: %v", addr, err)
	}
	out := make([]Replica, 0, len(byConn))
	for _, d := range byConn {
		out = append(out, Replica{DumpStats: *d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnID < out[j].ConnID })
	return out, nil
}

// parseSample reads one line of Prometheus' text format:
// name{k="v",...} value.
func parseSample(line string) (string, map[string]string, float64, bool) {
	labels := map[string]string{}
	name, rest := line, ""
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		name, rest = line[:i], strings.TrimSpace(line[j+1:])
		for _, kv := range strings.Split(line[i+1:j], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", nil, 0, false
		}
		name, rest = f[0], f[1]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return name, labels, v, err == nil
}
