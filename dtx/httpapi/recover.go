package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// A panic in a request's handling must cost that request, never the
// coordinator: the lean server runs handlers on its own goroutines, where
// an unrecovered panic ends the process, and net/http answers one with a
// reset connection. Both answer 500 and log the panic with its stack.

// internalError is the body of the 500 answered for a panic.
var internalError = map[string]string{"error": "internal error in sluice dtx (logged); please report it"}

// recovered logs a recovered panic value p for the request to path.
func recovered(log *slog.Logger, path string, p any) {
	if log == nil {
		log = slog.Default()
	}
	log.Error("dtx: a request handler panicked; answered 500", "path", path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
}

// recoverHTTP answers 500 for a panic in a net/http handler. Deferred
// directly by ServeHTTP.
func recoverHTTP(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil || p == http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared as net/http does
		if p != nil {
			panic(p)
		}
		return
	}
	recovered(log, r.URL.Path, p)
	writeJSON(w, http.StatusInternalServerError, internalError)
}
