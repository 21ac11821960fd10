// Package httpapi serves dtm's HTTP protocol (/api/dtmsvr/...) on top of a
// dtx.Coordinator, so that programs written against dtm's client run
// against sluice unchanged.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-db/sluice/dtx"
)

// Version is what /api/dtmsvr/version reports.
const Version = "sluice-dtx (dtm v1.19.0 HTTP protocol)"

// maxBody bounds a request body; dtm's own limit is the HTTP server's.
const maxBody = 16 << 20

// Handler returns the routes with DefaultConfig. gatherer serves
// /api/metrics and /metrics (nil: none).
func Handler(c *dtx.Coordinator, gatherer prometheus.Gatherer) http.Handler {
	return NewHandler(c, gatherer, DefaultConfig())
}

// NewHandler returns the routes with cfg.
func NewHandler(c *dtx.Coordinator, gatherer prometheus.Gatherer, cfg Config) http.Handler {
	h := &handler{c: c, mux: http.NewServeMux(), budget: &budget{max: cfg.MaxInflightBody}, noRaw: cfg.NoRawSyscalls}
	h.prepare, h.submit, h.abort = h.trans(c.Prepare), h.trans(c.Submit), h.trans(c.Abort)
	mux := h.mux
	mux.HandleFunc("GET /api/dtmsvr/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": Version})
	})
	mux.HandleFunc("GET /api/dtmsvr/newGid", h.newGid)
	mux.HandleFunc("POST /api/dtmsvr/prepare", h.prepare)
	mux.HandleFunc("POST /api/dtmsvr/submit", h.submit)
	mux.HandleFunc("POST /api/dtmsvr/abort", h.abort)
	mux.HandleFunc("POST /api/dtmsvr/forceStop", h.gidOp(c.ForceStop))
	mux.HandleFunc("POST /api/dtmsvr/resetNextCronTime", h.gidOp(c.ResetNextCronTime))
	for _, p := range []string{"registerBranch", "registerTccBranch", "registerXaBranch"} {
		mux.HandleFunc("POST /api/dtmsvr/"+p, h.registerBranch)
	}
	mux.HandleFunc("POST /api/dtmsvr/prepareWorkflow", h.prepareWorkflow)
	mux.HandleFunc("POST /api/json-rpc", h.jsonRPC)
	mux.HandleFunc("GET /api/dtmsvr/query", h.query)
	mux.HandleFunc("GET /api/dtmsvr/all", h.all)
	if gatherer != nil {
		ph := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
		mux.Handle("GET /api/metrics", ph)
		mux.Handle("GET /metrics", ph)
	}
	h.topicRoutes()
	if c.TestHooks() {
		mux.HandleFunc("GET /api/dtmsvr/test/processed", h.testProcessed)
		mux.HandleFunc("POST /api/dtmsvr/test/cronOnce", h.testCronOnce)
	}
	// An unknown route is gin's plain 404, as dtm answers it, not a
	// transaction that was not found.
	mux.HandleFunc("/api/dtmsvr/", http.NotFound)
	return h
}

type handler struct {
	c                      *dtx.Coordinator
	mux                    *http.ServeMux
	prepare, submit, abort http.HandlerFunc
	budget                 *budget // request bodies in flight, lean loop included
	noRaw                  bool    // Config.NoRawSyscalls
}

// ServeHTTP sends the calls every transaction makes straight to their
// handlers: ServeMux's pattern matching costs more than these few string
// compares, and an exact path with the right method is what the mux would
// have chosen too. Everything else (other methods, unclean paths, the rest
// of the routes) goes through the mux.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer recoverHTTP(h.c.Log(), w, r)
	switch r.Method {
	case http.MethodPost:
		switch r.URL.Path {
		case "/api/dtmsvr/submit":
			h.submit(w, r)
			return
		case "/api/dtmsvr/prepare":
			h.prepare(w, r)
			return
		case "/api/dtmsvr/abort":
			h.abort(w, r)
			return
		case "/api/dtmsvr/registerBranch", "/api/dtmsvr/registerTccBranch", "/api/dtmsvr/registerXaBranch":
			h.registerBranch(w, r)
			return
		}
	case http.MethodGet:
		if r.URL.Path == "/api/dtmsvr/newGid" {
			h.newGid(w, r)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

func (h *handler) trans(fn func(context.Context, *dtx.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := h.readBody(w, r)
		if err == nil {
			err = doTrans(r.Context(), fn, body.b)
			h.putBody(body)
		}
		writeResult(w, err)
	}
}

// doTrans decodes a prepare, submit or abort body and runs it.
func doTrans(ctx context.Context, fn func(context.Context, *dtx.Request) error, body []byte) error {
	req, err := ParseRequest(body)
	if err != nil {
		return err
	}
	return fn(ctx, req)
}

func (h *handler) newGid(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, h.newGidBody(nil))
}

// newGidBody appends newGid's answer to b. The gid is hex: no escaping;
// keys in encoding/json's (sorted) order.
func (h *handler) newGidBody(b []byte) []byte {
	b = append(b, `{"dtm_result":"`+dtx.ResultSuccess+`","gid":"`...)
	b = append(b, h.c.NewGid()...)
	return append(b, "\"}\n"...)
}

func (h *handler) gidOp(fn func(context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := h.readBody(w, r)
		if err == nil {
			var req struct {
				Gid string `json:"gid"`
			}
			err = json.Unmarshal(body.b, &req)
			h.putBody(body)
			if err != nil {
				err = fmt.Errorf("%w: malformed JSON body: %v", dtx.ErrBadRequest, err)
			} else if req.Gid == "" {
				err = fmt.Errorf("%w: gid is empty", dtx.ErrBadRequest)
			} else {
				err = fn(r.Context(), req.Gid)
			}
		}
		writeResult(w, err)
	}
}

func (h *handler) registerBranch(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err == nil {
		err = h.doRegisterBranch(r.Context(), body.b)
		h.putBody(body)
	}
	writeResult(w, err)
}

func (h *handler) doRegisterBranch(ctx context.Context, body []byte) error {
	fields := map[string]string{}
	if err := json.Unmarshal(body, &fields); err != nil {
		return fmt.Errorf("%w: malformed JSON body (want an object of strings): %v", dtx.ErrBadRequest, err)
	}
	return h.c.RegisterBranch(ctx, fields)
}

// prepareWorkflow answers with the workflow and the steps it recorded so
// far, which dtm's client reads with protojson as a DtmProgressesReply
// (bin_data base64).
func (h *handler) prepareWorkflow(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		writeErr(w, err)
		return
	}
	req, err := ParseRequest(body.b)
	h.putBody(body)
	if err != nil {
		writeErr(w, err)
		return
	}
	g, bs, err := h.c.PrepareWorkflow(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]BranchJSON, len(bs))
	for i := range bs {
		out[i] = branchJSON(&bs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"transaction": globalJSON(g), "progresses": out})
}

// query answers like dtm: 200 with a null transaction when the gid is unknown.
func (h *handler) query(w http.ResponseWriter, r *http.Request) {
	gid := r.URL.Query().Get("gid")
	if gid == "" {
		writeErr(w, fmt.Errorf("%w: no gid specified", dtx.ErrBadRequest))
		return
	}
	g, bs, err := h.c.Query(r.Context(), gid)
	if errors.Is(err, dtx.ErrNotFound) {
		writeJSON(w, http.StatusOK, map[string]any{"transaction": nil, "branches": []any{}})
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]BranchJSON, len(bs))
	for i := range bs {
		out[i] = branchJSON(&bs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"transaction": globalJSON(g), "branches": out})
}

// pageLimit is a listing's limit query parameter: 100 when absent, as dtm.
func pageLimit(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: limit must be a positive integer", dtx.ErrBadRequest)
	}
	return n, nil
}

func (h *handler) all(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := pageLimit(q)
	if err != nil {
		writeErr(w, err)
		return
	}
	if gid := q.Get("gid"); gid != "" {
		g, _, err := h.c.Query(r.Context(), gid)
		var list []GlobalJSON
		if err == nil {
			list = append(list, globalJSON(g))
		} else if !errors.Is(err, dtx.ErrNotFound) {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"transactions": list, "next_position": ""})
		return
	}
	// createTimeStart and createTimeEnd are unix milliseconds, as dtm's
	// admin UI sends them; dtm compares whole seconds, inclusive.
	var from, to time.Time
	for _, p := range []struct {
		key string
		t   *time.Time
	}{{"createTimeStart", &from}, {"createTimeEnd", &to}} {
		if s := q.Get(p.key); s != "" {
			ms, err := strconv.ParseInt(s, 10, 64)
			if err != nil || ms < 0 {
				writeErr(w, fmt.Errorf("%w: %s must be unix milliseconds", dtx.ErrBadRequest, p.key))
				return
			}
			*p.t = time.Unix(ms/1000, 0)
		}
	}
	gs, next, err := h.list(r.Context(), q.Get("position"), limit, q.Get("status"), q.Get("transType"), from, to)
	if err != nil {
		writeErr(w, err)
		return
	}
	list := make([]GlobalJSON, len(gs))
	for i, g := range gs {
		list[i] = globalJSON(g)
	}
	writeJSON(w, http.StatusOK, map[string]any{"transactions": list, "next_position": next})
}

// list pages through the store until it has limit transactions created
// within [from, to] (either may be zero), or the store has no more. next is
// the position to continue from, "" at the end.
func (h *handler) list(ctx context.Context, after string, limit int, status, transType string, from, to time.Time) ([]*dtx.Global, string, error) {
	var out []*dtx.Global
	for {
		gs, err := h.c.List(ctx, after, limit, status, transType)
		if err != nil {
			return nil, "", err
		}
		for _, g := range gs {
			after = g.Gid
			ct := g.CreateTime.Truncate(time.Second)
			if (!from.IsZero() && ct.Before(from)) || (!to.IsZero() && ct.After(to)) {
				continue
			}
			if out = append(out, g); len(out) == limit {
				return out, g.Gid, nil
			}
		}
		if len(gs) < limit {
			return out, "", nil
		}
	}
}

// testProcessed answers the gid of the next drive pass that ends (test
// hooks; dtm's waitTransProcessed).
func (h *handler) testProcessed(w http.ResponseWriter, r *http.Request) {
	gid, err := h.c.Processed(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"gid": gid})
}

// testCronOnce runs recovery once for one transaction due within
// cron_forward seconds, with the timeout clock now_forward seconds ahead
// (test hooks; dtm's CronTransOnce).
func (h *handler) testCronOnce(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	secs := func(k string) time.Duration {
		n, _ := strconv.Atoi(q.Get(k))
		return time.Duration(n) * time.Second
	}
	gid, err := h.c.CronOnce(r.Context(), secs("cron_forward"), secs("now_forward"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"gid": gid})
}

// GlobalJSON is a transaction as dtm's query shows it.
type GlobalJSON struct {
	Gid            string              `json:"gid"`
	TransType      string              `json:"trans_type"`
	Status         string              `json:"status"`
	Steps          []map[string]string `json:"steps,omitempty"`
	Payloads       []string            `json:"payloads,omitempty"`
	QueryPrepared  string              `json:"query_prepared,omitempty"`
	Protocol       string              `json:"protocol,omitempty"`
	CreateTime     *time.Time          `json:"create_time,omitempty"`
	UpdateTime     *time.Time          `json:"update_time,omitempty"`
	FinishTime     *time.Time          `json:"finish_time,omitempty"`
	RollbackTime   *time.Time          `json:"rollback_time,omitempty"`
	RollbackReason string              `json:"rollback_reason,omitempty"`
	Result         string              `json:"result,omitempty"`
	Options        string              `json:"options,omitempty"`
	CustomData     string              `json:"custom_data,omitempty"`
	NextCronTime   *time.Time          `json:"next_cron_time,omitempty"`
	Owner          string              `json:"owner,omitempty"`
	Retries        int                 `json:"retries,omitempty"`
	Stuck          string              `json:"stuck,omitempty"`
}

// BranchJSON is a branch as dtm's query shows it.
type BranchJSON struct {
	Gid        string     `json:"gid"`
	URL        string     `json:"url"`
	BinData    []byte     `json:"bin_data,omitempty"`
	BranchID   string     `json:"branch_id"`
	Op         string     `json:"op"`
	Status     string     `json:"status"`
	CreateTime *time.Time `json:"create_time,omitempty"`
	FinishTime *time.Time `json:"finish_time,omitempty"`
}

func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func globalJSON(g *dtx.Global) GlobalJSON {
	finish := g.FinishTime
	if g.Status != dtx.StatusSucceed {
		finish = time.Time{}
	}
	return GlobalJSON{Gid: g.Gid, TransType: g.TransType, Status: g.Status, Steps: g.Steps, Payloads: g.Payloads,
		QueryPrepared: g.QueryPrepared, Protocol: g.Protocol, CreateTime: tp(g.CreateTime), UpdateTime: tp(g.UpdateTime),
		FinishTime: tp(finish), RollbackTime: tp(g.RollbackTime), RollbackReason: g.RollbackReason, Result: g.Result,
		Options: dtx.MarshalOptions(g.Options), CustomData: g.CustomData, NextCronTime: tp(g.NextCronTime), Owner: g.Owner,
		Retries: g.Retries, Stuck: g.Stuck}
}

func branchJSON(b *dtx.Branch) BranchJSON {
	return BranchJSON{Gid: b.Gid, URL: b.URL, BinData: b.BinData, BranchID: b.BranchID, Op: b.Op, Status: b.Status,
		CreateTime: tp(b.CreateTime), FinishTime: tp(b.FinishTime)}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Header values shared by all responses: net/http only reads them, and
// assigning a prebuilt slice saves the one Header.Set allocates.
var (
	contentTypeJSON = []string{"application/json; charset=utf-8"}
	successBody     = []byte(`{"dtm_result":"` + dtx.ResultSuccess + `"}` + "\n")
	successLength   = []string{strconv.Itoa(len(successBody))}
)

// writeRaw answers 200 with a JSON body that is already encoded, with its
// length (net/http then neither buffers to find it nor chunks).
func writeRaw(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	if len(body) == len(successBody) {
		h["Content-Length"] = successLength
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeResult answers like dtm: {"dtm_result":"SUCCESS"} on success, 409
// with FAILURE, 425 with ONGOING; and clearer codes than dtm's 500 for bad
// input (400) and unknown gids (404).
func writeResult(w http.ResponseWriter, err error) {
	if err == nil {
		writeRaw(w, successBody)
		return
	}
	writeErr(w, err)
}

func writeErr(w http.ResponseWriter, err error) {
	code, body := errorBody(err)
	if code == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = retryAfter
	}
	writeJSON(w, code, body)
}

// errorBody is the status and body of an error answer.
func errorBody(err error) (int, map[string]string) {
	code, res := http.StatusInternalServerError, ""
	switch {
	case errors.Is(err, dtx.ErrBadRequest):
		code, res = http.StatusBadRequest, dtx.ResultFailure
	case errors.Is(err, dtx.ErrNotFound):
		code, res = http.StatusNotFound, dtx.ResultFailure
	case errors.Is(err, dtx.ErrFailure):
		code, res = http.StatusConflict, dtx.ResultFailure
	case errors.Is(err, dtx.ErrOngoing):
		code, res = http.StatusTooEarly, dtx.ResultOngoing
	case errors.Is(err, errBusy):
		code = http.StatusServiceUnavailable
	}
	body := map[string]string{"message": err.Error()}
	if res != "" {
		body["dtm_result"] = res
	}
	return code, body
}
