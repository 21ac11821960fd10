// Package dtmconsole runs sluice console against dtm v1.19.0 itself (its
// server, in this process, on a boltdb store): the transactions pages read
// dtm's admin API as they read sluice dtx serve's. It is a separate module
// so that dtm's server dependencies stay out of sluice's go.mod.
package dtmconsole

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dtm-labs/dtm/client/dtmcli"
	"github.com/dtm-labs/dtm/dtmsvr"
	"github.com/dtm-labs/dtm/dtmsvr/config"
	"github.com/dtm-labs/dtm/dtmsvr/storage/registry"
	"github.com/dtm-labs/logger"

	"github.com/sluice-db/sluice/console"
)

func TestConsoleAgainstDtm(t *testing.T) {
	config.MustLoadConfig("")
	logger.InitLog("error")
	conf := &config.Config
	conf.Store.Driver = config.BoltDb
	t.Chdir(t.TempDir()) // dtm's boltdb store is ./dtm.bolt
	registry.WaitStoreUp()
	dtmsvr.PopulateDB(false)
	dtmsvr.StartSvr()
	go dtmsvr.CronExpiredTrans(-1)
	server := "http://localhost:36789/api/dtmsvr"

	busi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/TransInFail") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"dtm_result":"FAILURE"}`)
			return
		}
		_, _ = io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
	}))
	defer busi.Close()
	for gid, in := range map[string]string{"dtm-ok": "/TransIn", "dtm-rollback": "/TransInFail"} {
		s := dtmcli.NewSaga(server, gid).
			Add(busi.URL+"/TransOut", busi.URL+"/TransOutRevert", map[string]int{"amount": 30}).
			Add(busi.URL+in, busi.URL+in+"Revert", map[string]int{"amount": 30})
		s.WaitResult = true
		_ = s.Submit()
	}
	cfg := console.DefaultConfig()
	cfg.Dtx, cfg.SampleEvery = []string{server}, 0
	cs, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(cs.Handler())
	defer ts.Close()
	get := func(u string) string {
		resp, err := http.Get(ts.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var list string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list = get("/dtx")
		if strings.Contains(list, `data-gid="dtm-ok" data-status="succeed"`) && strings.Contains(list, `data-gid="dtm-rollback" data-status="failed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console's list of dtm's transactions:\n%s", list)
		}
	}
	if strings.Contains(list, `class="banner"`) {
		t.Fatalf("a banner against dtm:\n%s", list)
	}
	detail := get("/dtx/txn?gid=dtm-rollback")
	for _, want := range []string{`id="txn-status" class="st-failed">failed`, busi.URL + "/TransInFail", busi.URL + "/TransOutRevert", "compensate"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail of dtm's transaction lacks %q:\n%s", want, detail)
		}
	}
	if f := get("/dtx?status=failed"); strings.Contains(f, `data-gid="dtm-ok"`) || !strings.Contains(f, `data-gid="dtm-rollback"`) {
		t.Errorf("status filter against dtm:\n%s", f)
	}
}
