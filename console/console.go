// Package console serves sluice's web console: the tasks of this machine's
// task directories, the binlog services, the workers of an etcd cluster
// and the transactions of dtx coordinators, on one page, with the actions
// the CLI has (pause, resume, stop, skip, replace, force-stop).
//
// It reads what the CLI reads (status.json, handle-error.json, etcd's
// cluster state, dtm's HTTP API) and runs the CLI's own code for the
// actions, through Actions, which cmd/sluice provides. The pages are Go
// templates with a little JavaScript, embedded: no build step.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Config is what the console shows and how it is reached.
type Config struct {
	// Listen is the address to serve on; a loopback one unless Token is set.
	Listen string
	// Token, when set, is required on every request: as the bearer token,
	// or once as ?token= (which sets a cookie for the rest of the visit).
	Token string
	// TaskRoots are directories searched for task directories, as sluice
	// task list searches them.
	TaskRoots []string
	// Etcd are the etcd endpoints of a worker cluster (one cluster), and
	// EtcdPrefix the root of its keys.
	Etcd       []string
	EtcdPrefix string
	// Dtx are dtx coordinators' (or dtm's) base URLs, http://HOST:PORT,
	// and DtxToken the bearer token of those that require one (sluice dtx
	// serve --token-file).
	Dtx      []string
	DtxToken string
	// Serve are binlog services' metrics addresses (HOST:PORT, or a URL).
	Serve []string
	// Actions runs the CLI's actions on a task; nil shows no actions.
	Actions Actions
	// SourceTimeout bounds each call to a coordinator, etcd or a binlog
	// service, so that one that does not answer costs a banner, not the
	// page.
	SourceTimeout time.Duration
	// PageSize is the rows of a list page.
	PageSize int
	// SampleEvery is how often the tasks' lag and rates are sampled for
	// the sparklines (an hour of them is kept); 0 samples only when a page
	// is loaded.
	SampleEvery time.Duration
	Log         *slog.Logger
}

// DefaultConfig returns the console's defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8686", EtcdPrefix: "/sluice", SourceTimeout: 2 * time.Second, PageSize: 100, SampleEvery: 30 * time.Second}
}

// Validate checks the config.
func (c *Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "console", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if c.Listen == "" {
		return bad("no listen address", "pass --listen 127.0.0.1:8686")
	}
	if !loopback(c.Listen) && c.Token == "" {
		return bad(fmt.Sprintf("--listen %s is not a loopback address and no token is set", c.Listen),
			"pass --token-file FILE (its first line is the token), or listen on 127.0.0.1")
	}
	if c.PageSize <= 0 {
		return bad("page size must be positive", "leave it at its default")
	}
	if c.SourceTimeout <= 0 {
		return bad("source timeout must be positive", "leave it at its default")
	}
	return nil
}

// loopback reports whether addr (host:port) can only be reached from this
// machine. An empty host listens on every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Actions are the CLI's actions on a task directory; each returns the line
// the CLI would print.
type Actions interface {
	Pause(ctx context.Context, dir, task string) (string, error)
	Resume(ctx context.Context, dir, task string) (string, error)
	Stop(ctx context.Context, dir, task string) (string, error)
	// Skip and Replace record a handle (sluice skip, sluice replace) for
	// the statement named by gtid or position.
	Skip(ctx context.Context, dir, task, gtid, position string) (string, error)
	Replace(ctx context.Context, dir, task, gtid, position string, sql []string) (string, error)
}

// Server is the console.
type Server struct {
	cfg   Config
	csrf  string
	pages map[string]*template.Template
	mux   *http.ServeMux
	hist  *history
	files statusFiles
	http  *http.Server

	mu   sync.Mutex
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// New makes the console; Serve runs it.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, csrf: hex.EncodeToString(b), mux: http.NewServeMux(), hist: newHistory(time.Hour)}
	if err := s.parse(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/tasks", http.StatusFound) })
	s.taskRoutes()
	s.dtxRoutes()
	s.serveRoutes()
	s.workerRoutes()
	return s, nil
}

var funcs = template.FuncMap{
	"ago":      ago,
	"seconds":  func(f float64) string { return fmt.Sprintf("%.1f s", f) },
	"rate":     func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"mb":       func(n any) string { return fmt.Sprintf("%.1f MB", toFloat(n)/1e6) },
	"stamp":    stamp,
	"mask":     Mask,
	"spark":    sparkline,
	"join":     strings.Join,
	"add":      func(a, b int) int { return a + b },
	"errorOf":  func(e string) string { m, _ := splitFix(Mask(e)); return m },
	"fixOf":    func(e string) string { _, f := splitFix(Mask(e)); return f },
	"notEmpty": func(s string) bool { return s != "" },
}

func toFloat(n any) float64 {
	switch v := n.(type) {
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// parse makes one template set per page: each page defines "content" in
// the shared layout.
func (s *Server) parse() error {
	s.pages = map[string]*template.Template{}
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console template %s: %w", n, err)
		}
		s.pages[base] = t
	}
	return nil
}

// page is what every page's layout needs, around the page's own data.
type page struct {
	Title   string
	Nav     string
	CSRF    string
	Banners []string // sources that could not be read: the page shows the rest
	Notice  string   // the outcome of an action
	Data    any
}

func (s *Server) render(w http.ResponseWriter, name string, p page) {
	p.CSRF = s.csrf
	t := s.pages[name]
	var b strings.Builder
	if err := t.Execute(&b, p); err != nil {
		s.cfg.Log.Error("console: render", "page", name, "err", err)
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// Handler is the console with its token check and CSRF check around it.
func (s *Server) Handler() http.Handler {
	return s.guard(s.mux)
}

const tokenCookie = "sluice_console_token"

// guard checks the token (when one is set) and the CSRF token of every
// POST. The CSRF token is a random value of this process, in every form:
// a page of another origin cannot read it, so it cannot forge an action.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if s.cfg.Token != "" {
			if q := r.URL.Query().Get("token"); q != "" && equal(q, s.cfg.Token) {
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				u := *r.URL
				v := u.Query()
				v.Del("token")
				u.RawQuery = v.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			if !s.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice console"`)
				http.Error(w, "401 unauthorized: open the console with ?token=TOKEN (the first line of its --token-file) or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
				return
			}
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "400 bad form: "+err.Error(), http.StatusBadRequest)
				return
			}
			if !equal(r.PostForm.Get("csrf"), s.csrf) {
				http.Error(w, "403 forbidden: the form's CSRF token is missing or wrong; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") && equal(strings.TrimPrefix(a, "Bearer "), s.cfg.Token) {
		return true
	}
	c, err := r.Cookie(tokenCookie)
	return err == nil && equal(c.Value, s.cfg.Token)
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Serve listens on Config.Listen and serves until ctx ends or Close.
// ready, if not nil, is called with the bound address.
func (s *Server) Serve(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return &sluice.Error{Op: "console", Err: fmt.Errorf("listen on %s: %w", s.cfg.Listen, err), Hint: "pass a free --listen address"}
	}
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.stop = cancel
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv := s.http
	s.mu.Unlock()
	defer cancel()
	if s.cfg.SampleEvery > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.sampleLoop(ctx)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	err = srv.Serve(ln)
	cancel()
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops Serve.
func (s *Server) Close() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// sourceCtx bounds one call to a source.
func (s *Server) sourceCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.SourceTimeout)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

func stamp(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil || v.IsZero() {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	}
	return "-"
}

// splitFix splits a sluice error's one line into the problem and its fix
// (sluice.Error writes the fix as " (fix: ...)").
func splitFix(e string) (msg, fix string) {
	i := strings.LastIndex(e, " (fix: ")
	if i < 0 {
		return e, ""
	}
	return e[:i], strings.TrimSuffix(e[i+len(" (fix: "):], ")")
}
