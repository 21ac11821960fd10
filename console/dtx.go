package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The transactions pages read a coordinator through the HTTP API dtm's
// admin UI uses (GET /api/dtmsvr/all and /api/dtmsvr/query, POST
// forceStop and resetNextCronTime), so they work against sluice dtx serve
// and against dtm itself.

// Txn is a global transaction as /api/dtmsvr/all and query return it.
type Txn struct {
	Gid            string     `json:"gid"`
	TransType      string     `json:"trans_type"`
	Status         string     `json:"status"`
	Protocol       string     `json:"protocol,omitempty"`
	CreateTime     *time.Time `json:"create_time,omitempty"`
	UpdateTime     *time.Time `json:"update_time,omitempty"`
	FinishTime     *time.Time `json:"finish_time,omitempty"`
	RollbackTime   *time.Time `json:"rollback_time,omitempty"`
	RollbackReason string     `json:"rollback_reason,omitempty"`
	Result         string     `json:"result,omitempty"`
	NextCronTime   *time.Time `json:"next_cron_time,omitempty"`
	Owner          string     `json:"owner,omitempty"`
	Retries        int        `json:"retries,omitempty"`
	Stuck          string     `json:"stuck,omitempty"`
	QueryPrepared  string     `json:"query_prepared,omitempty"`
	CustomData     string     `json:"custom_data,omitempty"`
}

// Branch is one branch of a transaction, as query returns it.
type Branch struct {
	Gid        string     `json:"gid"`
	URL        string     `json:"url"`
	BinData    []byte     `json:"bin_data,omitempty"`
	BranchID   string     `json:"branch_id"`
	Op         string     `json:"op"`
	Status     string     `json:"status"`
	CreateTime *time.Time `json:"create_time,omitempty"`
	FinishTime *time.Time `json:"finish_time,omitempty"`
}

// Body is the branch's request body, as text, with secrets masked.
func (b Branch) Body() string { return Mask(string(b.BinData)) }

// Took is how long the branch took, when it finished.
func (b Branch) Took() string {
	if b.CreateTime == nil || b.FinishTime == nil {
		return "-"
	}
	return b.FinishTime.Sub(*b.CreateTime).Round(time.Millisecond).String()
}

// coordinator is one --dtx.
type coordinator struct {
	base   string // http://host:port
	token  string
	client *http.Client
}

func newCoordinator(u, token string) coordinator {
	u = strings.TrimRight(u, "/")
	u = strings.TrimSuffix(u, "/api/dtmsvr")
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	return coordinator{base: u, token: token, client: http.DefaultClient}
}

func (c coordinator) get(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func (c coordinator) do(req *http.Request, out any) error {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("coordinator %s unreachable: %v", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("coordinator %s: %v", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("coordinator %s: %s %s: HTTP %d: %s", c.base, req.Method, req.URL.Path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("coordinator %s: %s: %v", c.base, req.URL.Path, err)
	}
	return nil
}

// maxScan bounds how many coordinator pages one console page reads to
// fill itself when a gid prefix filters (the API has no prefix filter):
// past it the page shows what it found and offers the next one.
const maxScan = 20

type listQuery struct {
	Status, Type, Prefix, Position string
	From, To                       time.Time
}

// list reads one page of up to limit transactions matching q, and the
// position the next page starts from ("" at the end).
func (c coordinator) list(ctx context.Context, q listQuery, limit int) ([]Txn, string, error) {
	var out []Txn
	pos := q.Position
	for scan := 0; scan < maxScan; scan++ {
		v := url.Values{"limit": {strconv.Itoa(limit)}}
		if q.Status != "" {
			v.Set("status", q.Status)
		}
		if q.Type != "" {
			v.Set("transType", q.Type)
		}
		if pos != "" {
			v.Set("position", pos)
		}
		if !q.From.IsZero() {
			v.Set("createTimeStart", strconv.FormatInt(q.From.UnixMilli(), 10))
		}
		if !q.To.IsZero() {
			v.Set("createTimeEnd", strconv.FormatInt(q.To.UnixMilli(), 10))
		}
		var resp struct {
			Transactions []Txn  `json:"transactions"`
			NextPosition string `json:"next_position"`
		}
		if err := c.get(ctx, "/api/dtmsvr/all", v, &resp); err != nil {
			return nil, "", err
		}
		// A whole coordinator page is taken, even past limit: the API
		// continues only from a page's end, and a page cut inside would
		// skip the rest of it.
		for _, t := range resp.Transactions {
			if strings.HasPrefix(t.Gid, q.Prefix) {
				out = append(out, t)
			}
		}
		pos = resp.NextPosition
		if pos == "" {
			return out, "", nil
		}
		if len(out) >= limit || q.Prefix == "" {
			return out, pos, nil
		}
	}
	return out, pos, nil
}

func (c coordinator) query(ctx context.Context, gid string) (*Txn, []Branch, error) {
	var resp struct {
		Transaction *Txn     `json:"transaction"`
		Branches    []Branch `json:"branches"`
	}
	if err := c.get(ctx, "/api/dtmsvr/query", url.Values{"gid": {gid}}, &resp); err != nil {
		return nil, nil, err
	}
	return resp.Transaction, resp.Branches, nil
}

func (c coordinator) post(ctx context.Context, op, gid string) error {
	b, _ := json.Marshal(map[string]string{"gid": gid})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/dtmsvr/"+op, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, nil)
}

func (s *Server) dtxRoutes() {
	s.mux.HandleFunc("GET /dtx", s.dtxPage)
	s.mux.HandleFunc("GET /dtx/txn", s.txnPage)
	s.mux.HandleFunc("POST /dtx/action", s.txnAction)
}

// coord is the coordinator a request names (c=INDEX, default the first).
func (s *Server) coord(r *http.Request, v url.Values) (int, coordinator, bool) {
	i, _ := strconv.Atoi(v.Get("c"))
	if i < 0 || i >= len(s.cfg.Dtx) {
		return 0, coordinator{}, false
	}
	return i, newCoordinator(s.cfg.Dtx[i], s.cfg.DtxToken), true
}

type dtxData struct {
	Coordinators []string
	C            int
	Query        listQuery
	FromText     string
	ToText       string
	Txns         []Txn
	Next         string
	First        bool
	Statuses     []string
	Types        []string
}

var (
	txnStatuses = []string{"prepared", "submitted", "succeed", "failed", "aborting"}
	txnTypes    = []string{"saga", "tcc", "msg", "xa", "workflow"}
)

func (s *Server) dtxPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := dtxData{Coordinators: s.cfg.Dtx, Statuses: txnStatuses, Types: txnTypes,
		Query:    listQuery{Status: q.Get("status"), Type: q.Get("type"), Prefix: strings.TrimSpace(q.Get("prefix")), Position: q.Get("pos")},
		FromText: q.Get("from"), ToText: q.Get("to"), First: q.Get("pos") == ""}
	var banners []string
	for _, p := range []struct {
		s string
		t *time.Time
	}{{d.FromText, &d.Query.From}, {d.ToText, &d.Query.To}} {
		if p.s == "" {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02T15:04", p.s, time.Local)
		if err != nil {
			banners = append(banners, fmt.Sprintf("time %q: give it as YYYY-MM-DDTHH:MM", p.s))
			continue
		}
		*p.t = t
	}
	i, c, ok := s.coord(r, q)
	d.C = i
	if ok {
		ctx, cancel := s.sourceCtx(r)
		txns, next, err := c.list(ctx, d.Query, s.cfg.PageSize)
		cancel()
		if err != nil {
			banners = append(banners, err.Error())
		}
		d.Txns, d.Next = txns, next
	} else if len(s.cfg.Dtx) == 0 {
		banners = append(banners, "no coordinator: start the console with --dtx http://HOST:PORT")
	}
	s.render(w, "dtx", page{Title: "Transactions", Nav: "dtx", Banners: banners, Notice: q.Get("notice"), Data: d})
}

type phase struct {
	At     *time.Time
	What   string
	Status string
}

type txnData struct {
	C        int
	Gid      string
	Txn      *Txn
	Branches []Branch
	Phases   []phase
	CanStop  bool
	CanReset bool
}

func (s *Server) txnPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	i, c, ok := s.coord(r, q)
	if !ok {
		http.Error(w, "404 no such coordinator", http.StatusNotFound)
		return
	}
	d := txnData{C: i, Gid: q.Get("gid")}
	var banners []string
	ctx, cancel := s.sourceCtx(r)
	t, bs, err := c.query(ctx, d.Gid)
	cancel()
	if err != nil {
		banners = append(banners, err.Error())
	}
	d.Txn, d.Branches = t, bs
	if t != nil {
		d.Phases = phases(t, bs)
		open := t.Status != "succeed" && t.Status != "failed"
		d.CanStop, d.CanReset = open, open
	}
	s.render(w, "txn", page{Title: "Transaction " + d.Gid, Nav: "dtx", Banners: banners, Notice: q.Get("notice"), Data: d})
}

// phases is the transaction's timeline from what the API records: its
// creation, each branch call's start and end, and its end.
func phases(t *Txn, bs []Branch) []phase {
	var ps []phase
	if t.CreateTime != nil {
		ps = append(ps, phase{At: t.CreateTime, What: t.TransType + " created", Status: "prepared"})
	}
	for _, b := range bs {
		what := b.Op + " " + b.BranchID
		if b.CreateTime != nil {
			ps = append(ps, phase{At: b.CreateTime, What: what + " registered", Status: "prepared"})
		}
		if b.FinishTime != nil {
			ps = append(ps, phase{At: b.FinishTime, What: what + " done", Status: b.Status})
		}
	}
	if t.RollbackTime != nil {
		ps = append(ps, phase{At: t.RollbackTime, What: "rollback: " + t.RollbackReason, Status: "aborting"})
	}
	if t.FinishTime != nil {
		ps = append(ps, phase{At: t.FinishTime, What: "finished", Status: t.Status})
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].At.Before(*ps[j].At) })
	return ps
}

func (s *Server) txnAction(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	i, c, ok := s.coord(r, f)
	if !ok {
		http.Error(w, "404 no such coordinator", http.StatusNotFound)
		return
	}
	gid := f.Get("gid")
	op := map[string]string{"forcestop": "forceStop", "resetcron": "resetNextCronTime"}[f.Get("action")]
	if op == "" || gid == "" {
		http.Error(w, "400 give an action (forcestop, resetcron) and a gid", http.StatusBadRequest)
		return
	}
	ctx, cancel := s.sourceCtx(r)
	err := c.post(ctx, op, gid)
	cancel()
	notice := op + " " + gid + ": done"
	if err != nil {
		notice = op + " " + gid + " failed: " + err.Error()
	}
	s.cfg.Log.Info("console: action", "action", op, "gid", gid, "coordinator", c.base, "client", r.RemoteAddr, "outcome", notice)
	v := url.Values{"c": {strconv.Itoa(i)}, "gid": {gid}, "notice": {notice}}
	http.Redirect(w, r, "/dtx/txn?"+v.Encode(), http.StatusSeeOther)
}
