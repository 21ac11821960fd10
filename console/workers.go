package console

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluice-db/sluice/cluster"
	"github.com/sluice-db/sluice/replicate"
)

// The workers page reads the worker cluster's state from etcd, as sluice
// status --etcd does: the workers and their leases, and which worker runs
// which task (a task moving shows as "old -> new").

type workerTask struct {
	Name, Worker, Stage, Applied, Error string
	Lag                                 float64
	Token                               int64
	Moving                              bool
}

type workersData struct {
	Workers []cluster.WorkerInfo
	Tasks   []workerTask
	Etcd    []string
}

func (s *Server) workerRoutes() {
	s.mux.HandleFunc("GET /workers", s.workersPage)
}

func (s *Server) workersPage(w http.ResponseWriter, r *http.Request) {
	d := workersData{Etcd: s.cfg.Etcd}
	var banners []string
	if len(s.cfg.Etcd) == 0 {
		banners = append(banners, "no worker cluster: start the console with --etcd http://HOST:2379")
	} else {
		state, err := s.loadCluster(r)
		if err != nil {
			banners = append(banners, err.Error())
		} else {
			d.Workers = state.Workers
			for _, t := range state.Tasks {
				d.Tasks = append(d.Tasks, workerTaskOf(t))
			}
		}
	}
	s.render(w, "workers", page{Title: "Workers", Nav: "workers", Banners: banners, Data: d})
}

func workerTaskOf(t cluster.TaskStatus) workerTask {
	wt := workerTask{Name: t.Name, Worker: t.Assigned, Stage: "unassigned", Applied: "-", Token: t.Token}
	var p struct {
		cluster.Published
		Replicate *replicate.Status `json:"replicate"`
	}
	if len(t.Status) > 0 && json.Unmarshal(t.Status, &p) == nil {
		wt.Worker, wt.Stage, wt.Error = p.Worker, p.Stage, Mask(p.Error)
		if p.Replicate != nil {
			wt.Stage, wt.Lag, wt.Applied = p.Replicate.Stage, p.Replicate.LagSeconds, p.Replicate.Applied.String()
		}
	} else if t.Assigned != "" {
		wt.Stage = "assigned, not started"
	}
	if t.Assigned != "" && wt.Worker != t.Assigned {
		wt.Worker += " -> " + t.Assigned
		wt.Moving = true
	}
	return wt
}

// loadCluster reads the worker cluster's state, within SourceTimeout.
func (s *Server) loadCluster(r *http.Request) (*cluster.State, error) {
	ctx, cancel := s.sourceCtx(r)
	defer cancel()
	cfg := cluster.DefaultConfig(s.cfg.Etcd...)
	cfg.Prefix = s.cfg.EtcdPrefix
	cfg.DialTimeout = s.cfg.SourceTimeout
	st, err := cluster.Open(ctx, cfg)
	if err != nil {
		return nil, errors.New("etcd " + Mask(err.Error()))
	}
	defer st.Close()
	state, err := st.Load(ctx)
	if err != nil {
		return nil, errors.New("etcd " + Mask(err.Error()))
	}
	return state, nil
}

// clusterTasks are the worker cluster's tasks as rows of the tasks page
// (no directory on this machine: no actions; the workers page has more).
func clusterTasks(state *cluster.State) []Task {
	var ts []Task
	for _, ct := range state.Tasks {
		wt := workerTaskOf(ct)
		t := Task{Name: wt.Name, Kind: "replication", Stage: wt.Stage, Worker: wt.Worker, Applied: wt.Applied, Source: "-", Lag: wt.Lag, Error: wt.Error}
		switch wt.Stage {
		case replicate.StageRunning, replicate.StageRetrying, replicate.StagePaused, replicate.StageCopying, replicate.StageStarting:
			t.Running = true
		}
		t.rank = rank(t, wt.Stage)
		ts = append(ts, t)
	}
	return ts
}
