package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice/replicate"
)

// Task is one row of the tasks page: what sluice task list and sluice
// status read from the task's directory.
type Task struct {
	Dir     string
	Name    string
	Kind    string // copy, replication, serve, global, kafka
	Stage   string // as sluice task list says it
	Worker  string
	Running bool
	PID     int
	Source  string
	Applied string
	Lag     float64
	TxnsPS  float64
	Error   string // one line: the problem and its fix
	Updated time.Time
	// rank orders the list: the lower, the worse.
	rank   int
	Status *replicate.Status
	Global *replicate.GlobalStatus
	Lags   []float64 // the last hour, oldest first
	Rates  []float64
}

// readTask reads one task directory as sluice task list and sluice status
// do. The status files are decoded again only when they changed (a task
// rewrites its status.json every second; most of 1,000 tasks are idle or
// stopped), and the lock is asked each time.
func (s *Server) readTask(dir string) Task {
	st, gs := s.files.read(dir)
	return taskOf(dir, st, gs)
}

func taskOf(dir string, st *replicate.Status, gs *replicate.GlobalStatus) Task {
	t := Task{Dir: dir, Name: filepath.Base(dir), Kind: "replication", Stage: "never ran replication", Source: "-", Applied: "-", Worker: "-", rank: 6}
	if st != nil {
		s := *st
		t.Status = &s
		t.Name, t.Stage, t.Lag, t.TxnsPS, t.Error, t.Updated = s.Task, s.Stage, s.LagSeconds, s.TxnsPerSec, s.Error, s.Updated
		if s.Source.File != "" {
			t.Source = s.Source.String()
		}
		if s.Applied.File != "" {
			t.Applied = s.Applied.String()
		}
		switch {
		case s.Serve != nil:
			t.Kind = "serve"
		case s.KafkaTxns > 0:
			t.Kind = "kafka"
		case s.Stage == replicate.StageCopying || s.Copy != nil && s.Applied.File == "":
			t.Kind = "copy"
		}
	}
	if gs != nil {
		g := *gs
		t.Global, t.Kind, t.Updated = &g, "global", g.Updated
		if t.Status == nil {
			t.Stage = "serving"
			for _, ms := range g.Merge.Sources {
				t.Lag = max(t.Lag, ms.LagSeconds)
			}
			t.TxnsPS = g.Rates.Transactions
		}
	}
	pid, running, _ := replicate.Holder(dir)
	t.Running, t.PID = running, pid
	last := t.Stage
	switch {
	case running:
		t.Worker = "pid " + strconv.Itoa(pid)
		if t.Status == nil && t.Global == nil {
			t.Stage = "copying"
		}
	case last == replicate.StageRunning || last == replicate.StageRetrying || last == replicate.StageStarting || last == replicate.StageCopying || last == replicate.StagePaused:
		t.Stage = "gone (last seen " + last + ")"
	}
	t.rank = rank(t, last)
	return t
}

// rank puts the tasks that need a person first: failed, then gone without
// a clean stop, retrying, paused, stopped on an error, then the running
// ones (by lag, in sortTasks), then cleanly stopped, then never run.
func rank(t Task, stage string) int {
	switch {
	case stage == replicate.StageFailed:
		return 0
	case strings.HasPrefix(t.Stage, "gone"):
		return 1
	case stage == replicate.StageRetrying:
		return 2
	case stage == replicate.StagePaused:
		return 3
	case t.Error != "":
		return 3
	case t.Running:
		return 4
	case stage == replicate.StageStopped:
		return 5
	}
	return 6
}

// sortTasks orders worst first: by rank, then the longest lag, then name.
func sortTasks(ts []Task) {
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.Lag != b.Lag {
			return a.Lag > b.Lag
		}
		return a.Name < b.Name
	})
}

// scanTasks reads every task directory under the roots; a root that
// cannot be read becomes a banner.
func (s *Server) scanTasks() ([]Task, []string) {
	var ts []Task
	var banners []string
	for _, root := range s.cfg.TaskRoots {
		dirs, err := replicate.FindTaskDirs(root)
		if err != nil {
			banners = append(banners, Mask(err.Error()))
			continue
		}
		for _, d := range dirs {
			ts = append(ts, s.readTask(d))
		}
	}
	return ts, banners
}

// taskDir checks that dir is a task directory under one of the roots, so
// that a form cannot point an action at any directory of the machine.
func (s *Server) taskDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no task directory given")
	}
	dir = filepath.Clean(dir)
	for _, root := range s.cfg.TaskRoots {
		root = filepath.Clean(root)
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || strings.Count(rel, string(filepath.Separator)) > 4 {
			continue
		}
		for _, f := range []string{"task.lock", replicate.StatusFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("%s is not a task directory under --tasks", dir)
}

type tasksData struct {
	Tasks            []Task
	Total            int
	Page, Pages      int
	Prev, Next       int
	Failing, Running int
}

func (s *Server) taskRoutes() {
	s.mux.HandleFunc("GET /tasks", s.tasksPage)
	s.mux.HandleFunc("GET /task", s.taskPage)
	s.mux.HandleFunc("POST /task/action", s.taskAction)
	s.mux.HandleFunc("POST /task/handle", s.taskHandle)
}

func (s *Server) tasksPage(w http.ResponseWriter, r *http.Request) {
	ts, banners := s.scanTasks()
	s.hist.observe(ts, s.cfg.SampleEvery)
	if len(s.cfg.Etcd) > 0 {
		if state, err := s.loadCluster(r); err != nil {
			banners = append(banners, err.Error())
		} else {
			ts = append(ts, clusterTasks(state)...)
		}
	}
	sortTasks(ts)
	d := tasksData{Total: len(ts)}
	for _, t := range ts {
		if t.rank <= 1 {
			d.Failing++
		}
		if t.Running {
			d.Running++
		}
	}
	pg, _ := strconv.Atoi(r.URL.Query().Get("page"))
	d.Pages = max(1, (len(ts)+s.cfg.PageSize-1)/s.cfg.PageSize)
	d.Page = min(max(pg, 1), d.Pages)
	lo := (d.Page - 1) * s.cfg.PageSize
	hi := min(lo+s.cfg.PageSize, len(ts))
	d.Tasks = ts[lo:hi]
	for i := range d.Tasks {
		if d.Tasks[i].Dir != "" {
			d.Tasks[i].Lags, d.Tasks[i].Rates = s.hist.series(d.Tasks[i].Dir)
		}
	}
	if d.Page > 1 {
		d.Prev = d.Page - 1
	}
	if d.Page < d.Pages {
		d.Next = d.Page + 1
	}
	s.render(w, "tasks", page{Title: "Tasks", Nav: "tasks", Banners: banners, Data: d})
}

// Stage times are the applier's pipeline clocks (replicate/stages.go).
type stageRow struct {
	Name       string
	Goroutines int
	States     string
}

type taskData struct {
	Task
	Handles      []replicate.Handle
	HandleErr    string
	Stages       []stageRow
	Timeline     []stageChange
	GTID, Pos    string // what the error names, for skip and replace
	Actions      bool
	CanPause     bool
	CanResume    bool
	CanStop      bool
	CanHandle    bool
	DiskUsedPct  float64
	CopyProgress string
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request) {
	dir, err := s.taskDir(r.URL.Query().Get("dir"))
	if err != nil {
		http.Error(w, "404 "+err.Error(), http.StatusNotFound)
		return
	}
	t := s.readTask(dir)
	s.hist.observe([]Task{t}, s.cfg.SampleEvery)
	t.Lags, t.Rates = s.hist.series(dir)
	d := taskData{Task: t, Actions: s.cfg.Actions != nil, Timeline: s.hist.timeline(dir)}
	if hs, err := replicate.ReadHandles(dir); err != nil {
		d.HandleErr = Mask(err.Error())
	} else {
		d.Handles = hs
	}
	if st := t.Status; st != nil {
		if st.Apply != nil {
			for name, v := range st.Apply.Stages {
				parts := make([]string, 0, len(v.Seconds))
				for k, sec := range v.Seconds {
					parts = append(parts, fmt.Sprintf("%s %.1f s", k, sec))
				}
				sort.Strings(parts)
				d.Stages = append(d.Stages, stageRow{Name: name, Goroutines: v.Goroutines, States: strings.Join(parts, ", ")})
			}
			sort.Slice(d.Stages, func(i, j int) bool { return d.Stages[i].Name < d.Stages[j].Name })
		}
		if st.DiskSize > 0 {
			d.DiskUsedPct = 100 * float64(st.DiskSize-st.DiskFree) / float64(st.DiskSize)
		}
		if c := st.Copy; c != nil {
			d.CopyProgress = fmt.Sprintf("%d rows, %.1f MB, %d of %d chunks", c.Rows, float64(c.Bytes)/1e6, c.ChunksDone, c.ChunksTotal)
		}
		d.GTID, d.Pos = statementOf(st.Error)
	}
	stage := ""
	if t.Status != nil {
		stage = t.Status.Stage
	}
	d.CanPause = t.Running && stage == replicate.StageRunning
	d.CanResume = t.Running && stage == replicate.StagePaused
	d.CanStop = t.Running
	d.CanHandle = !t.Running && t.Status != nil
	s.render(w, "task", page{Title: "Task " + t.Name, Nav: "tasks", Notice: r.URL.Query().Get("notice"), Data: d})
}

// statementOf finds the GTID and the binlog position a refusal names, to
// fill in the skip and replace forms (the user checks them on the
// confirmation page).
func statementOf(e string) (gtid, pos string) {
	if m := gtidIn.FindStringSubmatch(e); m != nil {
		gtid = m[1]
	}
	if m := posIn.FindStringSubmatch(e); m != nil {
		pos = m[1]
	}
	return gtid, pos
}

// actionDir is the task directory an action POST names, or false after
// answering 404 (no such task) or 403 (a console without actions).
func (s *Server) actionDir(w http.ResponseWriter, r *http.Request) (string, bool) {
	dir, err := s.taskDir(r.PostForm.Get("dir"))
	if err != nil {
		http.Error(w, "404 "+err.Error(), http.StatusNotFound)
		return "", false
	}
	if s.cfg.Actions == nil {
		http.Error(w, "403 this console runs without actions", http.StatusForbidden)
		return "", false
	}
	return dir, true
}

func (s *Server) taskAction(w http.ResponseWriter, r *http.Request) {
	dir, ok := s.actionDir(w, r)
	if !ok {
		return
	}
	t := s.readTask(dir)
	var out string
	var err error
	switch a := r.PostForm.Get("action"); a {
	case "pause":
		out, err = s.cfg.Actions.Pause(r.Context(), dir, t.Name)
	case "resume":
		out, err = s.cfg.Actions.Resume(r.Context(), dir, t.Name)
	case "stop":
		out, err = s.cfg.Actions.Stop(r.Context(), dir, t.Name)
	default:
		http.Error(w, "400 unknown action "+strconv.Quote(a), http.StatusBadRequest)
		return
	}
	if err != nil {
		out = "failed: " + err.Error()
	}
	s.audit(r, dir, r.PostForm.Get("action"), out)
	s.redirectTask(w, r, dir, out)
}

// audit logs an action and its outcome with who asked (the client's
// address): the console's own record, beside the task's log and, for skip
// and replace, its handle log.
func (s *Server) audit(r *http.Request, dir, action, outcome string) {
	s.cfg.Log.Info("console: action", "action", action, "task_dir", dir, "client", r.RemoteAddr, "outcome", Mask(outcome))
}

func (s *Server) redirectTask(w http.ResponseWriter, r *http.Request, dir, notice string) {
	v := url.Values{"dir": {dir}, "notice": {Mask(notice)}}
	http.Redirect(w, r, "/task?"+v.Encode(), http.StatusSeeOther)
}

type confirmData struct {
	Task
	Action    string
	GTID, Pos string
	SQL       []string
	SQLText   string
}

// taskHandle is skip and replace: the first POST shows the statement the
// task stopped at and what will be recorded; the POST with confirm=yes
// records it with the CLI's code.
func (s *Server) taskHandle(w http.ResponseWriter, r *http.Request) {
	dir, ok := s.actionDir(w, r)
	if !ok {
		return
	}
	f := r.PostForm
	action := f.Get("action")
	if action != "skip" && action != "replace" {
		http.Error(w, "400 unknown action "+strconv.Quote(action), http.StatusBadRequest)
		return
	}
	gtid, pos := strings.TrimSpace(f.Get("gtid")), strings.TrimSpace(f.Get("position"))
	if gtid != "" && pos != "" {
		// The form offers both when the error names both: a transaction
		// skip is the default, the statement one is chosen by "scope".
		if f.Get("scope") == "statement" {
			gtid = ""
		} else {
			pos = ""
		}
	}
	var sqls []string
	for _, l := range strings.Split(f.Get("sql"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			sqls = append(sqls, l)
		}
	}
	t := s.readTask(dir)
	if f.Get("confirm") != "yes" {
		s.render(w, "confirm", page{Title: action + " in task " + t.Name, Nav: "tasks",
			Data: confirmData{Task: t, Action: action, GTID: gtid, Pos: pos, SQL: sqls, SQLText: strings.Join(sqls, "\n")}})
		return
	}
	var out string
	var err error
	if action == "skip" {
		out, err = s.cfg.Actions.Skip(r.Context(), dir, t.Name, gtid, pos)
	} else {
		out, err = s.cfg.Actions.Replace(r.Context(), dir, t.Name, gtid, pos, sqls)
	}
	if err != nil {
		out = "failed: " + err.Error()
	}
	s.audit(r, dir, action, out)
	s.redirectTask(w, r, dir, out)
}

// Rank is the task's place in the worst-first order (0 is the worst).
func (t Task) Rank() int { return t.rank }

// statusFiles caches the decoded status files of each task directory by
// their modification time and size.
type statusFiles struct {
	mu sync.Mutex
	m  map[string]*cachedStatus
}

type cachedStatus struct {
	mod, gmod   time.Time
	size, gsize int64
	st          *replicate.Status
	gs          *replicate.GlobalStatus
}

func (c *statusFiles) read(dir string) (*replicate.Status, *replicate.GlobalStatus) {
	fi, err := os.Stat(filepath.Join(dir, replicate.StatusFile))
	gfi, gerr := os.Stat(filepath.Join(dir, replicate.GlobalStatusFile))
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*cachedStatus{}
	}
	e := c.m[dir]
	c.mu.Unlock()
	if e == nil {
		e = &cachedStatus{}
	} else {
		cp := *e
		e = &cp
	}
	switch {
	case err != nil:
		e.st, e.mod, e.size = nil, time.Time{}, 0
	case !fi.ModTime().Equal(e.mod) || fi.Size() != e.size || e.st == nil:
		e.st, e.mod, e.size = nil, fi.ModTime(), fi.Size()
		if s, err := replicate.ReadStatus(dir); err == nil {
			e.st = &s
		}
	}
	switch {
	case gerr != nil:
		e.gs, e.gmod, e.gsize = nil, time.Time{}, 0
	case !gfi.ModTime().Equal(e.gmod) || gfi.Size() != e.gsize || e.gs == nil:
		e.gs, e.gmod, e.gsize = nil, gfi.ModTime(), gfi.Size()
		if g, err := replicate.ReadGlobalStatus(dir); err == nil {
			e.gs = &g
		}
	}
	c.mu.Lock()
	c.m[dir] = e
	c.mu.Unlock()
	return e.st, e.gs
}
