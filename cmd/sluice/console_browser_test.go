package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-db/sluice/console"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestConsoleBrowser drives Debian's chromium, headless, through the
// console over a real set-up: two MariaDB sandboxes and a --mode all task,
// and sluice dtx serve with a saga that succeeds and one that rolls back.
// It checks what a person sees: the task's stage and lag; a pause from the
// page pauses the task and sluice status says so; a task stopped on a
// conflicting row shows its fix, and skip from the page lets the task,
// started again, go on; the transactions page lists what sluice dtx query
// reports; the binlog service page shows the replica of a sluice serve. With -update it writes the
// screenshots and docs/manual/console.md.
func TestConsoleBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: %v (make deps installs Debian's chromium)", err)
	}
	handlePauseSignals()

	// Replication: a --mode all task under the console's --tasks root.
	src := sandboxtest.Start(t, "consrc")
	dst := sandboxtest.Start(t, "condst")
	sdb := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, sdb, "CREATE DATABASE csrc", "CREATE TABLE csrc.t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO csrc.t VALUES (1,'a'),(2,'b')")
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "csrc", "vdst", "cdst", "name: vt", "name: orders").Replace(
		verifyTaskYAML(src.Endpoint(), dst.Endpoint(), "csrc.*", "dir: "+dir+"\n")))
	r := startMigrateAll(cfg)
	defer func() { r.stop() }()
	for {
		if s, err := replicate.ReadStatus(dir); err == nil && s.Stage == replicate.StageRunning {
			break
		}
		if r.exited() {
			t.Fatalf("migrate stopped: %v\n%s", r.err, r.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	sandboxtest.MustExec(t, sdb, "INSERT INTO csrc.t VALUES (3,'c')")

	// sluice dtx serve, and a business service for its sagas: TransIn
	// fails for the saga that rolls back.
	busi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/TransInFail") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"dtm_result":"FAILURE","message":"balance too low"}`)
			return
		}
		_, _ = io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
	}))
	defer busi.Close()
	dtxAddr := freeAddr(t)
	dctx, dcancel := context.WithCancel(context.Background())
	ddone := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs([]string{"dtx", "serve", "--store", "mem://", "--listen", dtxAddr})
		ddone <- root.ExecuteContext(dctx)
	}()
	defer func() {
		dcancel()
		<-ddone
	}()
	dtxURL := "http://" + dtxAddr
	waitHTTP(t, dtxURL+"/api/dtmsvr/version")
	submitSaga(t, dtxURL, "console-ok", busi.URL+"/TransIn")
	submitSaga(t, dtxURL, "console-rollback", busi.URL+"/TransInFail")
	waitTxn(t, dtxURL, "console-ok", "succeed")
	waitTxn(t, dtxURL, "console-rollback", "failed")

	// The console, with the CLI's actions.
	ccfg := console.DefaultConfig()
	ccfg.Listen, ccfg.TaskRoots, ccfg.Dtx, ccfg.Actions = "127.0.0.1:0", []string{root}, []string{dtxURL}, cliActions{}
	ccfg.SampleEvery = time.Second
	cs, err := console.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	cdone := make(chan error, 1)
	go func() { cdone <- cs.Serve(context.Background(), func(a string) { addrc <- a }) }()
	defer func() {
		cs.Close()
		<-cdone
	}()
	base := "http://" + <-addrc

	actx, acancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	bctx, tcancel := context.WithTimeout(bctx, 3*time.Minute)
	defer tcancel()
	shots := map[string][]byte{}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			shots[name] = b
			return chromedp.Void{}, err
		}
	}
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}

	// Tasks: the task with its stage and lag.
	run(chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-task="orders"]`)), shot("tasks"))
	stage, lag := text(`tr[data-task="orders"] td.stage`), text(`tr[data-task="orders"] td.lag`)
	if stage != "running" || !regexp.MustCompile(`^\d+\.\d s$`).MatchString(lag) {
		t.Fatalf("tasks page: stage %q lag %q, want running and a lag in seconds", stage, lag)
	}

	// Task detail: pause from the page; sluice status agrees.
	run(chromedp.Click(chromedp.CSS(`tr[data-task="orders"] a`)), chromedp.WaitVisible(chromedp.CSS(`#pause`)), shot("task"),
		chromedp.Click(chromedp.CSS(`#pause`)), chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if notice, st := text(`.notice`), text(`#stage`); !strings.Contains(notice, "paused at") || st != "paused" {
		t.Fatalf("after pause: notice %q, stage %q", notice, st)
	}
	var out bytes.Buffer
	st := newRoot()
	st.SetOut(&out)
	st.SetErr(io.Discard)
	st.SetArgs([]string{"status", "--config", cfg, "--json"})
	if err := st.Execute(); err != nil {
		t.Fatalf("sluice status after the page paused the task: %v\n%s", err, out.String())
	}
	var js struct {
		Stage   string `json:"stage"`
		Running bool   `json:"running"`
	}
	if err := json.Unmarshal(out.Bytes(), &js); err != nil || js.Stage != "paused" || !js.Running {
		t.Fatalf("sluice status --json: %+v %v\n%s", js, err, out.String())
	}
	run(chromedp.Click(chromedp.CSS(`#resume`)), chromedp.WaitVisible(chromedp.CSS(`#pause`)))
	if st := text(`#stage`); st != "running" {
		t.Fatalf("after resume from the page: stage %q", st)
	}

	// A row the target holds already: the task stops, the page shows the
	// fix, skip from the page (after its confirmation) is recorded, and the
	// task started again goes on past that transaction.
	ddb := sandboxtest.MustOpen(t, dst, "")
	sandboxtest.MustExec(t, ddb, "INSERT INTO cdst.t VALUES (10,'target')")
	sandboxtest.MustExec(t, sdb, "INSERT INTO csrc.t VALUES (10,'source')")
	for deadline := time.Now().Add(2 * time.Minute); !r.exited(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the task did not stop on the row the target holds")
		}
	}
	run(chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-task="orders"] .fix`)), shot("tasks-failed"))
	if fix := text(`tr[data-task="orders"] .fix`); !strings.Contains(fix, "sluice skip") {
		t.Fatalf("the stopped task's fix: %q", fix)
	}
	run(chromedp.Click(chromedp.CSS(`tr[data-task="orders"] a`)), chromedp.WaitVisible(chromedp.CSS(`#skip`)),
		chromedp.Click(chromedp.CSS(`#skip`)), chromedp.WaitVisible(chromedp.CSS(`#confirm`)), shot("skip-confirm"))
	if stmt := text(`#statement`); !strings.Contains(stmt, "already holds a row") {
		t.Fatalf("the confirmation shows %q, not the statement the task stopped at", stmt)
	}
	run(chromedp.Click(chromedp.CSS(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if n := text(`.notice`); !strings.Contains(n, "recorded skip GTID") {
		t.Fatalf("after the confirmed skip: %q", n)
	}
	r = startMigrateAll(cfg)
	sandboxtest.MustExec(t, sdb, "INSERT INTO csrc.t VALUES (11,'after')")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := ddb.QueryRow("SELECT COUNT(*) FROM cdst.t WHERE id = 11").Scan(&n); err == nil && n == 1 {
			break
		}
		if r.exited() || time.Now().After(deadline) {
			t.Fatalf("the task started again after the skip did not go on: %v\n%s", r.err, r.out.String())
		}
	}
	var v string
	if err := ddb.QueryRow("SELECT v FROM cdst.t WHERE id = 10").Scan(&v); err != nil || v != "target" {
		t.Fatalf("the skipped transaction's row: %q %v, want the target's own", v, err)
	}

	// Transactions: the list is what sluice dtx query says of each.
	run(chromedp.Navigate(base+"/dtx"), chromedp.WaitVisible(chromedp.CSS(`#txns`)), shot("transactions"))
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#txns tr[data-gid]')).map(r => r.dataset.gid + '/' + r.dataset.status)`))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(rows)
	var fromCLI []string
	for _, gid := range []string{"console-ok", "console-rollback"} {
		b, err := dtxQuery(context.Background(), dtxURL, "", gid)
		if err != nil {
			t.Fatal(err)
		}
		var q struct {
			Transaction struct {
				Status string `json:"status"`
			} `json:"transaction"`
		}
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		fromCLI = append(fromCLI, gid+"/"+q.Transaction.Status)
	}
	if strings.Join(rows, " ") != strings.Join(fromCLI, " ") {
		t.Fatalf("transactions page %v, sluice dtx query %v", rows, fromCLI)
	}
	run(chromedp.Click(chromedp.CSS(`tr[data-gid="console-rollback"] a`)), chromedp.WaitVisible(chromedp.CSS(`#branches`)), shot("transaction"))
	branches, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#branches tbody tr').length`))
	if err != nil {
		t.Fatal(err)
	}
	if branches < 2 {
		t.Fatalf("the rolled-back saga shows %d branches, want its action and compensation", branches)
	}
	// A binlog service (sluice serve, no target) under the same root, with
	// mariadb-binlog reading it as its one replica.
	serveAddr := freeAddr(t)
	serveDir := filepath.Join(root, "binlogs")
	sep := src.Endpoint()
	serveCfg := verifyTask(t, fmt.Sprintf(`name: binlogs
source: {host: %s, port: %d, user: %s, password: %q}
incremental: {binlog-file: mysql-bin.000001, binlog-pos: 4}
dir: %s
serve: {listen: %s, server-id: 4242, users: [{user: replica, password: rpw}]}
`, sep.Host, sep.Port, sep.User, sep.Password, serveDir, serveAddr))
	sctx, scancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs([]string{"serve", "--config", serveCfg})
		sdone <- root.ExecuteContext(sctx)
	}()
	defer func() {
		scancel()
		<-sdone
	}()
	host, port, _ := net.SplitHostPort(serveAddr)
	var reader *exec.Cmd
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		s, err := replicate.ReadStatus(serveDir)
		if err == nil && s.Serve != nil && reader == nil {
			reader = exec.Command("mariadb-binlog", "--read-from-remote-server", "--host", host, "--port", port, "--user", "replica",
				"--stop-never", "--stop-never-slave-server-id=77", "--result-file=/dev/null", "mysql-bin.000001")
			reader.Env = append(os.Environ(), "MYSQL_PWD=rpw")
			if err := reader.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = reader.Process.Kill()
				_ = reader.Wait()
			}()
		}
		if err == nil && s.Serve != nil && len(s.Serve.Replicas) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binlog service shows no replica: %+v %v", s.Serve, err)
		}
	}
	run(chromedp.Navigate(base+"/serve"), chromedp.WaitVisible(chromedp.CSS(`table.replicas`)), shot("serve"))
	if id := text(`table.replicas tbody td`); id != "77" {
		t.Fatalf("binlog service page: first replica cell %q, want server_id 77", id)
	}
	run(chromedp.Navigate(base+"/workers"), chromedp.WaitVisible(chromedp.CSS(`main`)), shot("workers"),
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`#tasks`)), shot("tasks-phone"))
	if *updateBadInput {
		writeConsoleManual(t, shots)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP waits until u answers (the server is up).
func waitHTTP(t *testing.T, u string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", u, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitSaga submits a two-step saga (TransOut, then in) as dtm's client
// does.
func submitSaga(t *testing.T, server, gid, in string) {
	t.Helper()
	out := strings.TrimSuffix(in, "/TransIn")
	out = strings.TrimSuffix(out, "/TransInFail") + "/TransOut"
	body, _ := json.Marshal(map[string]any{"gid": gid, "trans_type": "saga",
		"steps":    []map[string]string{{"action": out, "compensate": out + "Revert"}, {"action": in, "compensate": in + "Revert"}},
		"payloads": []string{`{"amount":30}`, `{"amount":30}`}})
	resp, err := http.Post(server+"/api/dtmsvr/submit", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit %s: %d %s", gid, resp.StatusCode, b)
	}
}

func waitTxn(t *testing.T, server, gid, status string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		b, err := dtxQuery(context.Background(), server, "", gid)
		if err == nil && strings.Contains(string(b), fmt.Sprintf(`"status": %q`, status)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s not %s: %v\n%s", gid, status, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeConsoleManual writes docs/manual/console.md and its screenshots
// from this run.
func writeConsoleManual(t *testing.T, shots map[string][]byte) {
	t.Helper()
	dir := filepath.Join("..", "..", "docs", "manual", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range shots {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "manual", "console.md"), []byte(consoleManual), 0o644); err != nil {
		t.Fatal(err)
	}
}

// consoleManual is docs/manual/console.md; TestConsoleBrowser -update
// writes it with the screenshots of its run.
const consoleManual = `# sluice console

<!-- Written by TestConsoleBrowser (go test ./cmd/sluice -run TestConsoleBrowser -update):
     the screenshots come from that test's run, not from hand edits. -->

` + "`sluice console`" + ` serves one web page for the tasks of a machine, its binlog services, the
workers of an etcd cluster and the transactions of dtx coordinators (or of dtm itself, through
the HTTP API dtm's admin UI uses).

` + "```" + `
sluice console --tasks /srv/sluice --dtx http://127.0.0.1:36789
sluice console --listen 0.0.0.0:8686 --token-file /etc/sluice/console.token \
  --tasks /srv/sluice --etcd http://10.0.0.5:2379 --dtx http://10.0.0.6:36789 --serve 10.0.0.7:9360
` + "```" + `

| flag | what it shows |
|---|---|
| ` + "`--tasks DIR`" + ` (repeatable; default $SLUICE_HOME) | the task directories under DIR, as ` + "`sluice task list`" + ` finds them |
| ` + "`--etcd URL`" + ` | a worker cluster: which worker runs what, leases, tasks moving |
| ` + "`--dtx URL`" + ` (repeatable) | a coordinator's transactions (` + "`sluice dtx serve`" + ` or dtm); ` + "`--dtx-token-file`" + ` (or $SLUICE_DTX_TOKEN) for one that requires a token |
| ` + "`--serve ADDR`" + ` (repeatable) | a binlog service's metrics address; serve tasks under --tasks appear anyway |

## Security

- It listens on 127.0.0.1:8686. Another address needs ` + "`--token-file`" + `: every request then
  needs the file's first line as ` + "`Authorization: Bearer`" + `, or once as ` + "`?token=`" + ` (which sets a
  cookie). A wrong or missing token gets 401.
- Every action is a POST that carries the page's CSRF token; a POST without it gets 403.
- Secrets are never shown: the status files hold no password, and every error line, SQL text
  and request body is masked (` + "`user:***@`" + `, ` + "`password=***`" + `).
- An action runs the CLI's own code: pause and resume (` + "`sluice pause`" + `/` + "`resume`" + `), stop
  (` + "`sluice stop`" + `), skip and replace (` + "`sluice skip`" + `/` + "`replace`" + `, recorded in the task's
  ` + "`handle-error.json`" + ` and refused with the same message when the error names another
  statement or the task runs). Skip and replace show the statement the task stopped at and ask
  for confirmation first.
- A coordinator, etcd or binlog service that does not answer within ` + "`--source-timeout`" + `
  (2 s) is a banner at the top; the rest of the page loads.

## Tasks

One row per task, the worst first: failed, gone without a clean stop, retrying, paused or
stopped on an error, then the running ones by lag, then the stopped and those that never ran.
A stopped task shows its one-line error and its fix. With ` + "`--etcd`" + ` the worker cluster's tasks are
listed too, with the worker that runs each. The sparklines are the lag and
transactions/s over the last hour, as sampled by the console while it runs. Lists are paged
(` + "`--page-size`" + `, 100): with 1,000 tasks a page reads only the status files that changed.

![tasks](console/tasks.png)

On a phone:

![tasks on a phone](console/tasks-phone.png)

## Task detail

Stage, positions (source, relay, the checkpoint applied), lag, relay log on disk, the time per
pipeline stage, the stage changes the console saw, the handled statements, and the actions.

![task](console/task.png)

A task stopped on a row the target holds already, and the confirmation that skip asks for:

![a stopped task](console/tasks-failed.png)

![skip asks for confirmation](console/skip-confirm.png)

## Transactions

The list is dtm's admin list (` + "`GET /api/dtmsvr/all`" + `), filtered by status, type, gid prefix and
creation time, paged by the coordinator's position. The detail (` + "`GET /api/dtmsvr/query`" + `) shows
the branches with their status, timings and request bodies, a timeline, and force-stop and
"retry now" (reset of the next cron time) for a transaction that has not ended. The same pages
work against dtm v1.19.0 itself: compat/dtmconsole runs them against dtm's own server.

![transactions](console/transactions.png)

![a saga that rolled back](console/transaction.png)

## Binlog service and workers

![binlog service](console/serve.png)

![workers](console/workers.png)
`
