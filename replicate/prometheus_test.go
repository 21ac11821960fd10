package replicate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestPrometheusScrapesTheDashboard runs a real Prometheus (Debian's) that
// scrapes a running task, and checks what is shipped against it: promtool
// accepts the exposition (names, types, units) and the alert rules, and
// every query of the Grafana dashboard returns data (errors by class too:
// every class is exported from 0). Without Prometheus installed ('make
// deps' installs it) the test fails.
func TestPrometheusScrapesTheDashboard(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (make deps installs it): %v", err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (make deps installs it): %v", err)
	}
	root := "../deploy"
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(root, "prometheus", "sluice-alerts.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE pm", "CREATE TABLE pm.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE pm.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "pm", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "pm" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "pm" }
	r := run(t, cfg)
	workload(t, src, "pm", 1, 30)
	st := r.waitApplied(t, masterStatus(t, src))

	body := scrape(t, st.MetricsAddr)
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}

	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\nscrape_configs:\n  - job_name: sluice-replication\n    static_configs: [{targets: [%q]}]\n",
		mustAbs(t, filepath.Join(root, "prometheus", "sluice-alerts.yml")), st.MetricsAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	var log sandboxtest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1/query", port)

	b, err := os.ReadFile(filepath.Join(root, "grafana", "sluice-replication.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	vars := strings.NewReplacer(`"$task"`, `".*"`, `"$worker"`, `".*"`)
	// Queries of rates need two scrapes; the workload keeps the counters
	// moving. Poll until each query has data, bounded against a hang only.
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "sluice_kafka_") {
				// A Kafka sink task's own series; cluster's
				// TestKafkaSinkTaskFailsOver checks that it exports them.
				continue
			}
			q := vars.Replace(tg.Expr)
			var err error
			sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("panel %q: data from %s", p.Title, q), func() bool {
				var n int
				n, err = promQuery(api, q)
				if err != nil && !strings.Contains(err.Error(), "connection refused") && !errors.Is(err, errNotReady) {
					t.Fatalf("panel %q: %s: %v\n%s", p.Title, q, err, log.String())
				}
				if n > 0 {
					return true
				}
				sandboxtest.MustExec(t, src, "INSERT INTO pm.nokey VALUES (1, 'tick')")
				return false
			}, func() string { return fmt.Sprintf("last error %v\n%s", err, log.String()) })
		}
	}
	// Every sluice metric a panel names exists in the exposition.
	for _, m := range regexp.MustCompile(`sluice_[a-z_]+`).FindAllString(string(b), -1) {
		if !strings.Contains(body, m) && !strings.HasPrefix(m, "sluice_kafka_") {
			t.Errorf("the dashboard names %s, which the task does not export", m)
		}
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// promQuery runs an instant query and returns how many series it found.
func promQuery(api, q string) (int, error) {
	resp, err := http.Get(api + "?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		// Prometheus answers 503 "Service Unavailable" until its storage
		// is ready: the same as not listening yet.
		return 0, errNotReady
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", q, r.Error)
	}
	return len(r.Data.Result), nil
}

var errNotReady = errors.New("prometheus: not ready yet")

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
