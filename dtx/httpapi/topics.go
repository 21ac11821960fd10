package httpapi

import (
	"net/http"
)

// Topic and key-value routes, as dtm serves them.
func (h *handler) topicRoutes() {
	h.mux.HandleFunc("GET /api/dtmsvr/subscribe", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeResult(w, h.c.Subscribe(r.Context(), q.Get("topic"), q.Get("url"), q.Get("remark")))
	})
	h.mux.HandleFunc("GET /api/dtmsvr/unsubscribe", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeResult(w, h.c.Unsubscribe(r.Context(), q.Get("topic"), q.Get("url")))
	})
	h.mux.HandleFunc("DELETE /api/dtmsvr/topic/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeResult(w, h.c.DeleteTopic(r.Context(), r.PathValue("name")))
	})
	h.mux.HandleFunc("GET /api/dtmsvr/queryKV", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kv, err := h.c.QueryKV(r.Context(), q.Get("cat"), q.Get("key"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"kv": kv})
	})
	h.mux.HandleFunc("GET /api/dtmsvr/scanKV", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := pageLimit(q)
		if err != nil {
			writeErr(w, err)
			return
		}
		kv, next, err := h.c.ScanKV(r.Context(), q.Get("cat"), q.Get("position"), limit)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"kv": kv, "next_position": next})
	})
}
