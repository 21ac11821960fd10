package dtx_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestLeaseResumeAfterKill: a coordinator on the MySQL store is killed
// (-9) while it calls a saga's branch (the kill placed by that call being
// seen); a coordinator started next, under the same --instance or another,
// resumes the saga at once, although the killed one's lease runs for ten
// minutes: the store saw its session end (issue 30: in-flight transactions
// waited out the 30 s lease).
func TestLeaseResumeAfterKill(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	for _, c := range []struct{ name, next string }{{"same instance", "a"}, {"takeover", "b"}} {
		t.Run(c.name, func(t *testing.T) {
			store := fmt.Sprintf("mysql://root@127.0.0.1:%d/dtx_resume_%s", inst.Port, sanitize(c.name))
			var calls atomic.Int64
			seen := make(chan struct{}, 1)
			release := make(chan struct{})
			branch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					seen <- struct{}{}
					select { // the first call hangs until its caller is gone
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"dtm_result":"SUCCESS"}`)
			}))
			defer branch.Close()
			defer close(release)
			proc := func(instance string) *coordProc {
				port, err := sandbox.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				lf, err := os.Create(filepath.Join(t.TempDir(), instance+".log"))
				if err != nil {
					t.Fatal(err)
				}
				return &coordProc{t: t, bin: bin, log: lf, url: fmt.Sprintf("http://127.0.0.1:%d/api/dtmsvr", port),
					args: []string{"dtx", "serve", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--store", store,
						"--instance", instance, "--lease", "10m", "--request-timeout", "2m", "--log-level", "info"}}
			}
			a := proc("a")
			a.start()
			gid := "resume-" + sanitize(c.name)
			body := fmt.Sprintf(`{"gid":%q,"trans_type":"saga","steps":[{"action":"%s/out","compensate":"%s/comp"}],"payloads":["{}"]}`, gid, branch.URL, branch.URL)
			if code, b := post(t, a.url+"/submit", body); code != http.StatusOK {
				t.Fatalf("submit: %d %s", code, b)
			}
			<-seen // a is calling the branch: the saga is in flight, under a's lease
			a.kill()
			next := proc(c.next)
			next.start()
			defer next.kill()
			// The bound only reports a failure: the lease itself runs 10 minutes.
			q, err := dtxtest.WaitStatus(context.Background(), next.url, gid, 2*time.Minute, "succeed")
			if err != nil {
				log, _ := os.ReadFile(next.log.Name())
				t.Fatalf("not resumed while the killed coordinator's lease runs: %v (%d branch calls)\n%s", err, calls.Load(), log)
			}
			if calls.Load() < 2 {
				t.Fatalf("succeeded with %d branch calls", calls.Load())
			}
			if log, _ := os.ReadFile(next.log.Name()); !strings.Contains(string(log), "resuming the transactions of a coordinator") {
				t.Errorf("the resume is not logged:\n%s", log)
			}
			_ = q
		})
	}
}
