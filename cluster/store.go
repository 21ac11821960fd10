package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/task"
)

// Store is the tasks' state in etcd, for the `sluice task` commands and
// `sluice status`; workers use it too.
type Store struct {
	cfg Config
	cli *clientv3.Client
}

// Open connects to etcd. Close releases the connection.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// The client logs every reconnect at warn level; sluice reports
		// what matters in its own lines.
		Logger: zap.NewNop(),
		// Keepalive pings notice a dead etcd or a cut link within seconds.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Context:              ctx,
	})
	if err != nil {
		return nil, unreachable(cfg, err)
	}
	s := &Store{cfg: cfg, cli: cli}
	// clientv3.New does not wait for a connection: ask for something so
	// that a wrong URL is one clear error now, not a hang later.
	sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(sctx, cfg.key("tasks", ""), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, unreachable(cfg, err)
	}
	return s, nil
}

func unreachable(cfg Config, err error) error {
	return &sluice.Error{Op: "connect to etcd " + strings.Join(cfg.Endpoints, ","), Err: fmt.Errorf("%w: %v", sluice.ErrUnreachable, err),
		Hint: "check that etcd runs there (sluice sandbox etcd up --port P starts one) and the --etcd URL"}
}

// Close closes the etcd client.
func (s *Store) Close() error { return s.cli.Close() }

// Client is the etcd client (tests).
func (s *Store) Client() *clientv3.Client { return s.cli }

// AddTask stores a task file under its name. The YAML must parse as a task
// with source and target; a task of that name must not exist yet.
func (s *Store) AddTask(ctx context.Context, yaml []byte) (string, error) {
	// ${VAR} passwords are the workers' to resolve from their environment:
	// check the file with them blanked, and store it as given.
	cfg, err := task.Parse(envRef.ReplaceAll(yaml, []byte("redacted")))
	if err != nil {
		return "", err
	}
	need := []string{"source", "target"}
	if cfg.HasSink() {
		need = need[:1]
	}
	if err := cfg.Require(need...); err != nil {
		return "", err
	}
	if !ValidName(cfg.Name) {
		return "", &sluice.Error{Op: "task add", Err: fmt.Errorf("%w: task name %q cannot be an etcd key", sluice.ErrConfig, cfg.Name), Hint: "use a name without / or spaces"}
	}
	k := s.cfg.key("tasks", cfg.Name)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, string(yaml))).Commit()
	if err != nil {
		return "", unreachable(s.cfg, err)
	}
	if !resp.Succeeded {
		return "", &sluice.Error{Op: "task add " + cfg.Name, Err: fmt.Errorf("%w: task %s exists", sluice.ErrConfig, cfg.Name),
			Hint: "remove it first with 'sluice task remove " + cfg.Name + "', or give the task another name"}
	}
	return cfg.Name, nil
}

// RemoveTask deletes a task and its assignment; its worker stops it.
func (s *Store) RemoveTask(ctx context.Context, name string) error {
	k := s.cfg.key("tasks", name)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).Then(
		clientv3.OpDelete(k), clientv3.OpDelete(s.cfg.key("assign", name)), clientv3.OpDelete(s.cfg.key("fence", name)),
		clientv3.OpDelete(s.cfg.key("status", name))).Commit()
	if err != nil {
		return unreachable(s.cfg, err)
	}
	if !resp.Succeeded {
		return noTask(name)
	}
	return nil
}

func noTask(name string) error {
	return &sluice.Error{Op: "task " + name, Err: fmt.Errorf("%w: no task %s in etcd", sluice.ErrConfig, name), Hint: "run 'sluice task list --etcd URL' to see the tasks"}
}

// MoveTask assigns a task to a live worker; the current owner stops it and
// the named worker takes it over from the checkpoint.
func (s *Store) MoveTask(ctx context.Context, name, worker string) error {
	tk, wk := s.cfg.key("tasks", name), s.cfg.key("workers", worker)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(tk), ">", 0), clientv3.Compare(clientv3.CreateRevision(wk), ">", 0)).
		Then(clientv3.OpPut(s.cfg.key("assign", name), worker)).Else(clientv3.OpGet(tk, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return unreachable(s.cfg, err)
	}
	if resp.Succeeded {
		return nil
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return noTask(name)
	}
	return &sluice.Error{Op: "task move " + name, Err: fmt.Errorf("%w: no live worker %s", sluice.ErrConfig, worker),
		Hint: "start it with 'sluice worker --etcd URL --name " + worker + "', or pick one from 'sluice status --etcd URL'"}
}

// WorkerInfo is what a live worker publishes about itself.
type WorkerInfo struct {
	Name    string    `json:"name"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Lease   int64     `json:"lease"`
}

// Fence is the fencing token of a task's current owner: the etcd revision
// at which its owner key was created (concurrency.Mutex), which only grows.
type Fence struct {
	Worker string    `json:"worker"`
	Token  int64     `json:"token"`
	Lease  int64     `json:"lease"`
	Since  time.Time `json:"since"`
}

// TaskStatus is one task's line of `sluice status --etcd`.
type TaskStatus struct {
	Name     string          `json:"name"`
	Assigned string          `json:"assigned"`
	Owner    string          `json:"owner"`
	Token    int64           `json:"token"`
	Status   json.RawMessage `json:"status,omitempty"`
}

// State is the whole cluster as etcd holds it.
type State struct {
	Workers []WorkerInfo `json:"workers"`
	Tasks   []TaskStatus `json:"tasks"`
}

// Load reads every task, assignment, owner and status in one revision.
func (s *Store) Load(ctx context.Context) (*State, error) {
	resp, err := s.cli.Get(ctx, s.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, unreachable(s.cfg, err)
	}
	st := &State{}
	tasks := map[string]*TaskStatus{}
	get := func(n string) *TaskStatus {
		if t, ok := tasks[n]; ok {
			return t
		}
		t := &TaskStatus{Name: n}
		tasks[n] = t
		return t
	}
	var names []string
	for _, kv := range resp.Kvs {
		kind, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), s.cfg.Prefix+"/"), "/")
		if !ok {
			continue
		}
		switch kind {
		case "tasks":
			get(name)
			names = append(names, name)
		case "workers":
			var w WorkerInfo
			if json.Unmarshal(kv.Value, &w) == nil {
				st.Workers = append(st.Workers, w)
			}
		case "assign":
			get(name).Assigned = string(kv.Value)
		case "fence":
			var f Fence
			if json.Unmarshal(kv.Value, &f) == nil {
				t := get(name)
				t.Owner, t.Token = f.Worker, f.Token
			}
		case "status":
			get(name).Status = json.RawMessage(kv.Value)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		st.Tasks = append(st.Tasks, *tasks[n])
	}
	sort.Slice(st.Workers, func(a, b int) bool { return st.Workers[a].Name < st.Workers[b].Name })
	return st, nil
}

// TaskFile returns a task's YAML.
func (s *Store) TaskFile(ctx context.Context, name string) ([]byte, error) {
	resp, err := s.cli.Get(ctx, s.cfg.key("tasks", name))
	if err != nil {
		return nil, unreachable(s.cfg, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, noTask(name)
	}
	return resp.Kvs[0].Value, nil
}

var errLeaseLost = errors.New("lease lost")

var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)
