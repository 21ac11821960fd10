//go:build dtmconformance

// This file replaces dtm's test/main_test.go, test/types.go and the helpers
// of test/dtmsvr_test.go when run.sh runs dtm v1.19.0's own test files
// against sluice's coordinator. dtm's tests drive dtm in process; here the
// same helpers go through sluice's HTTP API: status through /query, and
// dtm's in-process test hooks (TransProcessedTestChan, CronTransOnce, the
// forwarded clocks) through the routes `sluice dtx serve --test-hooks`
// adds. Nothing else of dtm's test code is changed.
package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dtm-labs/dtm/client/dtmcli"
	"github.com/dtm-labs/dtm/client/dtmcli/dtmimp"
	"github.com/dtm-labs/dtm/client/workflow"
	"github.com/dtm-labs/dtm/dtmsvr/config"
	"github.com/dtm-labs/dtm/dtmutil"
	"github.com/dtm-labs/dtm/test/busi"
	"github.com/dtm-labs/dtmdriver"
	"github.com/dtm-labs/logger"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/grpcapi"
	"github.com/sluice-db/sluice/dtx/httpapi"
	"github.com/sluice-db/sluice/sandbox"
)

var conf = &config.Config

// DtmServer and the others are dtm's (test/dtmsvr_test.go).
var (
	DtmServer     = dtmutil.DefaultHTTPServer
	DtmGrpcServer = dtmutil.DefaultGrpcServer
	Busi          = busi.Busi
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	config.MustLoadConfig("")
	logger.InitLog(dtmimp.OrString(os.Getenv("LOG_LEVEL"), "warn"))
	conf.UpdateBranchSync = 1
	conf.Store.Driver = "sluice"
	dtmdriver.Middlewares.HTTP = append(dtmdriver.Middlewares.HTTP, busi.SetHTTPHeaderForHeadersYes)
	dtmdriver.Middlewares.Grpc = append(dtmdriver.Middlewares.Grpc, busi.SetGrpcHeaderForHeadersYes)

	// The business database: a sandbox MariaDB, with dtm's own schema.
	reapDeadRuns()
	dir, err := os.MkdirTemp("", "dtmconf")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	port, err := sandbox.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sc := sandbox.DefaultConfig()
	sc.Dir, sc.Name, sc.Port, sc.BufferPool = dir, "busi", port, "128M"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	inst, err := sandbox.Up(ctx, sc)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the business database:", err)
		return 1
	}
	defer inst.Stop(context.Background(), time.Minute) //nolint:errcheck // the test run is over
	ep := inst.Endpoint()
	busi.BusiConf = dtmcli.DBConf{Driver: "mysql", Host: ep.Host, Port: int64(ep.Port), User: ep.User, Password: ep.Password}
	busi.ResetXaData()
	// The Redis barrier tests' business store: dtm's busi dials
	// localhost:6379 without a password, so this one listens there, on
	// loopback only, and holds nothing but the tests' barrier keys.
	stopRedis, err := startBusiRedis(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the business Redis on 127.0.0.1:6379:", err)
		return 1
	}
	defer stopRedis()
	busi.SetRedisBothAccount(10000, 10000) // as dtm's busi.PopulateDB
	// dtm's SQL scripts, from its module (run.sh sets DTM_DIR).
	for _, f := range []string{"busi.mysql.sql", "dtmcli.barrier.mysql.sql"} {
		dtmutil.RunSQLScript(busi.BusiConf, filepath.Join(os.Getenv("DTM_DIR"), "sqls", f), false)
	}

	// sluice's coordinator on dtm's default address, with the test hooks.
	st, err := boltstore.Open(filepath.Join(dir, "dtx.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	cfg := dtx.DefaultConfig()
	cfg.TestHooks = true
	cfg.RetryInterval = time.Duration(conf.RetryInterval) * time.Second
	cfg.TimeoutToFail = time.Duration(conf.TimeoutToFail) * time.Second
	cfg.CheckBranchURLs = false                    // the busi gRPC server starts after the coordinator
	cfg.AlertWebhook = busi.Busi + "/AlertWebHook" // as dtm's main_test.go
	reg := prometheus.NewRegistry()
	coord, err := dtx.New(cfg, st, reg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := coord.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer coord.Close()
	ln, err := listenFixed("127.0.0.1:36789")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtm's default address is taken:", err)
		return 1
	}
	srv := &http.Server{Handler: httpapi.Handler(coord, reg), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()
	// dtm's gRPC API on dtm's default gRPC address.
	gln, err := listenFixed("127.0.0.1:36790")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtm's default gRPC address is taken:", err)
		return 1
	}
	gs := grpcapi.New(coord)
	go gs.Serve(gln) //nolint:errcheck // ends with Stop
	defer gs.Stop()

	hsvr, gsvr := busi.Startup()
	workflow.InitHTTP(DtmServer, Busi+"/workflow/resume") // as dtm's main_test.go
	workflow.InitGrpc(DtmGrpcServer, busi.BusiGrpc, gsvr)
	go busi.RunGrpc(gsvr)
	go busi.RunHTTP(hsvr)
	for i := 0; ; i++ {
		resp, err := http.Get(busi.Busi + "/TransOutRevert")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			fmt.Fprintln(os.Stderr, "busi did not start:", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	subscribeTopic()     // msg_test.go: the topic genMsg sends to
	subscribeGrpcTopic() // msg_grpc_test.go: the same for gRPC
	return m.Run()
}

func dbGet() *dtmutil.DB {
	return dtmutil.DbGet(busi.BusiConf)
}

// hook calls a test route of the coordinator and returns the gid it names.
func hook(method, path string) string {
	var res struct {
		Gid string `json:"gid"`
	}
	resp, err := dtmcli.GetRestyClient().SetTimeout(15*time.Second).R().SetResult(&res).Execute(method, DtmServer+"/test/"+path)
	if err != nil || resp.StatusCode() != http.StatusOK {
		// dtm's helpers end the whole run here (logger.FatalfIf); ending
		// only the test keeps the report of the others.
		fmt.Fprintf(os.Stderr, "test hook %s: %v %v\n", path, err, resp)
		failed.Store(true)
		runtime.Goexit()
	}
	return res.Gid
}

// waitTransProcessed waits for the coordinator to finish one pass over gid.
func waitTransProcessed(gid string) {
	logger.Debugf("waiting for gid %s", gid)
	id := hook(http.MethodGet, "processed")
	if id != gid {
		fmt.Fprintf(os.Stderr, "------- expecting: %s but %s found\n", gid, id)
		failed.Store(true)
		runtime.Goexit()
	}
}

// dtm's TestMain sets dtmsvr.CronForwardDuration to 180 s and
// NowForwardDuration to 0; the helpers below move them for one call.
var cronForward, nowForward = 180, 0

// failed is set when a helper ended a test early.
var failed atomic.Bool

func cronTransOnce(t *testing.T, gid string) {
	gid2 := hook(http.MethodPost, "cronOnce?cron_forward="+strconv.Itoa(cronForward)+"&now_forward="+strconv.Itoa(nowForward))
	assert.Equal(t, gid, gid2)
	if gid != "" {
		waitTransProcessed(gid)
	}
}

var e2p = dtmimp.E2P

func cronTransOnceForwardNow(t *testing.T, gid string, seconds int) {
	old := nowForward
	nowForward = seconds
	cronTransOnce(t, gid)
	nowForward = old
}

func cronTransOnceForwardCron(t *testing.T, gid string, seconds int) {
	old := cronForward
	cronForward = seconds
	cronTransOnce(t, gid)
	cronForward = old
}

func submitForwardCron(seconds int, fn func()) {
	old := cronForward
	cronForward = seconds
	fn()
	cronForward = old
}

const (
	StatusPrepared  = dtmcli.StatusPrepared
	StatusSubmitted = dtmcli.StatusSubmitted
	StatusSucceed   = dtmcli.StatusSucceed
	StatusFailed    = dtmcli.StatusFailed
	StatusAborting  = dtmcli.StatusAborting
)

func getBeforeBalances(store string) []int {
	b1 := busi.GetBalanceByUID(busi.TransOutUID, store)
	b2 := busi.GetBalanceByUID(busi.TransInUID, store)
	return []int{b1, b2}
}

func assertSameBalance(t *testing.T, before []int, store string) {
	b1 := busi.GetBalanceByUID(busi.TransOutUID, store)
	b2 := busi.GetBalanceByUID(busi.TransInUID, store)
	assert.Equal(t, before[0], b1)
	assert.Equal(t, before[1], b2)
}

func assertNotSameBalance(t *testing.T, before []int, store string) {
	b1 := busi.GetBalanceByUID(busi.TransOutUID, store)
	b2 := busi.GetBalanceByUID(busi.TransInUID, store)
	assert.NotEqual(t, before[0], b1)
	assert.Equal(t, before[0]+before[1], b1+b2)
}

// queried is what the helpers below read from /query.
type queried struct {
	Transaction *struct {
		Status         string `json:"status"`
		RollbackReason string `json:"rollback_reason"`
		Result         string `json:"result"`
	} `json:"transaction"`
	Branches []struct {
		Status string `json:"status"`
	} `json:"branches"`
}

func query(gid string) *queried {
	var q queried
	resp, err := dtmcli.GetRestyClient().R().SetResult(&q).SetQueryParam("gid", gid).Get(DtmServer + "/query")
	logger.FatalfIf(err != nil || resp.StatusCode() != http.StatusOK, "query %s: %v %v", gid, err, resp)
	return &q
}

// TransGlobal is what dtm's tests read of a transaction.
type TransGlobal struct {
	Status         string
	RollbackReason string
	Result         string
}

func getTransStatus(gid string) string {
	if t := getTrans(gid); t != nil {
		return t.Status
	}
	return ""
}

func getTrans(gid string) *TransGlobal {
	q := query(gid)
	if q.Transaction == nil {
		return nil
	}
	return &TransGlobal{Status: q.Transaction.Status, RollbackReason: q.Transaction.RollbackReason, Result: q.Transaction.Result}
}

func getBranchesStatus(gid string) []string {
	status := []string{}
	for _, b := range query(gid).Branches {
		status = append(status, b.Status)
	}
	return status
}

func isSQLStore() bool { return false }

// testStoreResetCronTime (dtm's test/store_test.go) reads dtm's own storage
// tables, which sluice does not have: the tests that use it are skipped.
func testStoreResetCronTime(t *testing.T, funcName string, resetCronHandler func(expire int64, limit int64) (int64, bool, error)) {
	t.Skip("reads dtm's internal storage tables")
}

// startBusiRedis runs redis-server on 127.0.0.1:6379 in dir until stop.
func startBusiRedis(dir string) (stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed (fix: make deps)")
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("the port is taken (fix: stop that server, e.g. systemctl stop redis-server)")
	}
	rdir := filepath.Join(dir, "redis")
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", "6379", "--bind", "127.0.0.1", "--dir", rdir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "redis.log")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
		if err == nil {
			c.Close()
			return stop, nil
		}
		if i == 200 {
			stop()
			return nil, fmt.Errorf("redis-server did not listen within 10 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reapDeadRuns stops the business databases of earlier runs whose test
// process died without its deferred cleanup (a dtm test that panics ends
// the process at once), so that they do not run on forever.
func reapDeadRuns() {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "dtmconf*", "owner.pid"))
	for _, f := range owners {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue
		}
		dir := filepath.Dir(f)
		insts, _ := sandbox.List(dir)
		for _, inst := range insts {
			_ = inst.Kill()
		}
		_ = os.RemoveAll(dir)
	}
}

// listenFixed listens on one of dtm's fixed ports. An outgoing connection
// elsewhere on the machine may hold it as its ephemeral port for a moment
// (run.sh reserves the ports where it can): wait up to 30 s for it.
func listenFixed(addr string) (net.Listener, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
