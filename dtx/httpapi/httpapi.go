// Package httpapi serves dtm's HTTP protocol (/api/dtmsvr/...) on top of a
// dtx.Coordinator, so that programs written against dtm's client run
// against sluice unchanged.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// Handler returns the routes. gatherer serves /api/metrics and /metrics (nil: none).
func Handler(c *dtx.Coordinator, gatherer prometheus.Gatherer) http.Handler {
	h := &handler{c: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/dtmsvr/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": Version})
	})
	mux.HandleFunc("GET /api/dtmsvr/newGid", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"gid": c.NewGid(), "dtm_result": dtx.ResultSuccess})
	})
	mux.HandleFunc("POST /api/dtmsvr/prepare", h.trans(c.Prepare))
	mux.HandleFunc("POST /api/dtmsvr/submit", h.trans(c.Submit))
	mux.HandleFunc("POST /api/dtmsvr/abort", h.trans(c.Abort))
	mux.HandleFunc("POST /api/dtmsvr/forceStop", h.gidOp(c.ForceStop))
	mux.HandleFunc("POST /api/dtmsvr/resetNextCronTime", h.gidOp(c.ResetNextCronTime))
	for _, p := range []string{"registerBranch", "registerTccBranch"} {
		mux.HandleFunc("POST /api/dtmsvr/"+p, h.registerBranch)
	}
	mux.HandleFunc("GET /api/dtmsvr/query", h.query)
	mux.HandleFunc("GET /api/dtmsvr/all", h.all)
	if gatherer != nil {
		ph := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
		mux.Handle("GET /api/metrics", ph)
		mux.Handle("GET /metrics", ph)
	}
	mux.HandleFunc("/api/dtmsvr/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, fmt.Errorf("%w: no such route %s %s", dtx.ErrNotFound, r.Method, r.URL.Path))
	})
	return mux
}

type handler struct{ c *dtx.Coordinator }

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", dtx.ErrBadRequest, err)
	}
	return b, nil
}

func (h *handler) trans(fn func(context.Context, *dtx.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err == nil {
			var req *dtx.Request
			if req, err = dtx.ParseRequest(body); err == nil {
				err = fn(r.Context(), req)
			}
		}
		writeResult(w, err)
	}
}

func (h *handler) gidOp(fn func(context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err == nil {
			var req struct {
				Gid string `json:"gid"`
			}
			if err = json.Unmarshal(body, &req); err != nil {
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
	body, err := readBody(r)
	if err == nil {
		fields := map[string]string{}
		if err = json.Unmarshal(body, &fields); err != nil {
			err = fmt.Errorf("%w: malformed JSON body (want an object of strings): %v", dtx.ErrBadRequest, err)
		} else {
			err = h.c.RegisterBranch(r.Context(), fields)
		}
	}
	writeResult(w, err)
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

func (h *handler) all(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeErr(w, fmt.Errorf("%w: limit must be a positive integer", dtx.ErrBadRequest))
			return
		}
		limit = n
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
	gs, err := h.c.List(r.Context(), q.Get("position"), limit, q.Get("status"), q.Get("transType"))
	if err != nil {
		writeErr(w, err)
		return
	}
	list := make([]GlobalJSON, len(gs))
	next := ""
	for i, g := range gs {
		list[i] = globalJSON(g)
	}
	if len(gs) == limit {
		next = gs[len(gs)-1].Gid
	}
	writeJSON(w, http.StatusOK, map[string]any{"transactions": list, "next_position": next})
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
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeResult answers like dtm: {"dtm_result":"SUCCESS"} on success, 409
// with FAILURE, 425 with ONGOING; and clearer codes than dtm's 500 for bad
// input (400) and unknown gids (404).
func writeResult(w http.ResponseWriter, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, map[string]string{"dtm_result": dtx.ResultSuccess})
		return
	}
	writeErr(w, err)
}

func writeErr(w http.ResponseWriter, err error) {
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
	}
	body := map[string]string{"message": err.Error()}
	if res != "" {
		body["dtm_result"] = res
	}
	writeJSON(w, code, body)
}
