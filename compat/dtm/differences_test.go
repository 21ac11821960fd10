package compat

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dtm-labs/dtm/client/dtmcli"
	"github.com/dtm-labs/dtm/client/dtmcli/dtmimp"

	"github.com/sluice-db/sluice/dtx/dtxtest"
)

// TestDtmDifferences covers where sluice answered differently from dtm
// v1.19.0 (issue 17), each checked with dtm's own client or the raw HTTP
// that dtm's tests send.
func TestDtmDifferences(t *testing.T) {
	stores(t, func(t *testing.T, dtm string) {
		ctx := context.Background()
		t.Run("business message kept in the rollback reason", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			err := saga(dtm, gid, map[string]string{"TransIn": "FAILURE:Insufficient balance"}).Submit()
			mustErr(t, err, "Insufficient balance")
			expect(t, dtm, gid, "failed", map[string]int{"TransOut": 1, "TransOutCompensate": 1})
			q, err := dtxtest.Query(ctx, dtm, gid)
			if err != nil {
				t.Fatal(err)
			}
			if r := q.Transaction.RollbackReason; !strings.Contains(r, "Insufficient balance") || !strings.Contains(r, "/TransIn") {
				t.Fatalf("rollback reason %q lacks the business message", r)
			}
		})
		t.Run("retry limit retries at once and waits for the result", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := saga(dtm, gid, map[string]string{"TransIn": "ERRORx2"})
			s.WithRetryLimit(3)
			if err := s.Submit(); err != nil {
				t.Fatalf("two errors within a retry limit of 3: %v", err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})

			gid = dtmcli.MustGenGid(dtm)
			s = saga(dtm, gid, map[string]string{"TransIn": "ERRORx2"})
			s.WithRetryLimit(1)
			mustErr(t, s.Submit(), "RetryCount is greater than RetryLimit, RetryLimit: 1")
			expect(t, dtm, gid, "failed", map[string]int{"TransOut": 1, "TransOutCompensate": 1})
			q, err := dtxtest.Query(ctx, dtm, gid)
			if err != nil {
				t.Fatal(err)
			}
			if r := q.Transaction.RollbackReason; r != "RetryCount is greater than RetryLimit, RetryLimit: 1" {
				t.Fatalf("rollback reason %q", r)
			}
		})
		t.Run("message topics", func(t *testing.T) {
			topic := "pay-" + dtmcli.MustGenGid(dtm)
			for _, u := range []string{busi.URL + "/TransOut", busi.URL + "/TransIn"} {
				resp, err := dtmcli.GetRestyClient().R().SetQueryParams(map[string]string{"topic": topic, "url": u, "remark": "r"}).Get(dtm + "/subscribe")
				if err != nil || resp.StatusCode() != http.StatusOK {
					t.Fatalf("subscribe %s: %v %v", u, err, resp)
				}
			}
			if resp, _ := dtmcli.GetRestyClient().R().SetQueryParams(map[string]string{"topic": topic, "url": busi.URL + "/TransIn"}).Get(dtm + "/subscribe"); resp.StatusCode() == http.StatusOK {
				t.Fatal("a second subscription of one URL was accepted")
			}
			gid := dtmcli.MustGenGid(dtm)
			m := dtmcli.NewMsg(dtm, gid).AddTopic(topic, body(nil))
			if err := m.Submit(); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
			q, err := dtxtest.Query(ctx, dtm, gid)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, b := range q.Branches {
				ids = append(ids, b.BranchID)
			}
			if strings.Join(ids, ",") != "01-01,01-02" {
				t.Fatalf("branch ids %v, want dtm's 01-01,01-02", ids)
			}
			var kv struct {
				KV []struct {
					Version int `json:"version"`
				} `json:"kv"`
			}
			if _, err := dtmcli.GetRestyClient().R().SetResult(&kv).SetQueryParams(map[string]string{"cat": "topics", "key": topic}).Get(dtm + "/queryKV"); err != nil || len(kv.KV) != 1 || kv.KV[0].Version != 2 {
				t.Fatalf("queryKV: %v %+v", err, kv)
			}
			resp, err := dtmcli.GetRestyClient().R().Delete(dtm + "/topic/" + topic)
			if err != nil || resp.StatusCode() != http.StatusOK {
				t.Fatalf("delete topic: %v %v", err, resp)
			}
			mustErr(t, dtmcli.NewMsg(dtm, dtmcli.MustGenGid(dtm)).AddTopic(topic, body(nil)).Submit(), "topic not found")
		})
		t.Run("empty action URL is a no-op", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := dtmcli.NewSaga(dtm, gid).
				Add(busi.URL+"/TransOut", busi.URL+"/TransOutCompensate", body(nil)).
				Add("", "", body(nil)).
				Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(nil))
			s.WaitResult = true
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
		})
		t.Run("old format with steps[].data runs", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			data := strconv.Quote(`{"amount":30}`)
			raw := fmt.Sprintf(`{"gid":%q,"trans_type":"saga","steps":[{"action":"%s/TransOut","compensate":"%s/TransOutCompensate","data":%s},{"action":"%s/TransIn","compensate":"%s/TransInCompensate","data":%s}]}`,
				gid, busi.URL, busi.URL, data, busi.URL, busi.URL, data)
			resp, err := dtmcli.GetRestyClient().R().SetBody(raw).Post(dtm + "/submit")
			if err != nil || resp.StatusCode() != http.StatusOK {
				t.Fatalf("submit: %v %v", err, resp)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
		})
		t.Run("payload count that does not match the steps", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			raw := fmt.Sprintf(`{"gid":%q,"trans_type":"saga","steps":[{"action":"%s/TransOut","compensate":"%s/TransOutCompensate"},{"action":"%s/TransIn","compensate":"%s/TransInCompensate"}],"payloads":["{}"]}`,
				gid, busi.URL, busi.URL, busi.URL, busi.URL)
			resp, err := dtmcli.GetRestyClient().R().SetBody(raw).Post(dtm + "/submit")
			if err != nil || resp.StatusCode() == http.StatusOK || !strings.Contains(resp.String(), "1 payloads for 2 steps") {
				t.Fatalf("submit with 1 payload for 2 steps: %v %d %s", err, resp.StatusCode(), resp.String())
			}
			if q, err := dtxtest.Query(ctx, dtm, gid); err == nil && q.Status() != "" {
				t.Fatalf("the refused saga was stored: %s", q.Status())
			}
		})
		t.Run("TCC timeout reason", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			tcc := &dtmcli.Tcc{TransBase: *dtmimp.NewTransBase(gid, "tcc", dtm, "")}
			tcc.TimeoutToFail = 1
			if err := dtmimp.TransCallDtm(&tcc.TransBase, "prepare"); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "failed", map[string]int{})
			q, err := dtxtest.Query(ctx, dtm, gid)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`^Timeout after \d+ seconds$`).MatchString(q.Transaction.RollbackReason) {
				t.Fatalf("rollback reason %q, want dtm's `Timeout after N seconds`", q.Transaction.RollbackReason)
			}
		})
		t.Run("unknown route", func(t *testing.T) {
			resp, err := dtmcli.GetRestyClient().R().Get(dtm + "/noSuchRoute")
			if err != nil || resp.StatusCode() != http.StatusNotFound || strings.Contains(resp.String(), "transaction") {
				t.Fatalf("unknown route: %v %d %s", err, resp.StatusCode(), resp.String())
			}
		})
		t.Run("all filters by creation time", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			if err := saga(dtm, gid, nil).Submit(); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			listed := func(query string) bool {
				var res struct {
					Transactions []struct {
						Gid string `json:"gid"`
					} `json:"transactions"`
				}
				resp, err := dtmcli.GetRestyClient().R().SetResult(&res).Get(dtm + "/all?limit=100000&" + query)
				if err != nil || resp.StatusCode() != http.StatusOK {
					t.Fatalf("all?%s: %v %v", query, err, resp)
				}
				for _, tr := range res.Transactions {
					if tr.Gid == gid {
						return true
					}
				}
				return false
			}
			if !listed(fmt.Sprintf("createTimeStart=%d&createTimeEnd=%d", now-60_000, now+60_000)) {
				t.Fatal("a saga created within the range is not listed")
			}
			if listed(fmt.Sprintf("createTimeStart=%d", now+60_000)) || listed(fmt.Sprintf("createTimeEnd=%d", now-60_000)) {
				t.Fatal("a saga created outside the range is listed")
			}
			resp, _ := dtmcli.GetRestyClient().R().Get(dtm + "/all?createTimeStart=yesterday")
			if resp.StatusCode() != http.StatusBadRequest {
				t.Fatalf("a malformed createTimeStart: HTTP %d", resp.StatusCode())
			}
		})
		t.Run("resetNextCronTime", func(t *testing.T) {
			// A finished transaction: 200, as dtm answers.
			gid := dtmcli.MustGenGid(dtm)
			if err := saga(dtm, gid, nil).Submit(); err != nil {
				t.Fatal(err)
			}
			reset := func(gid string) {
				resp, err := dtmcli.GetRestyClient().R().SetBody(map[string]string{"gid": gid}).Post(dtm + "/resetNextCronTime")
				if err != nil || resp.StatusCode() != http.StatusOK {
					t.Fatalf("resetNextCronTime %s: %v %v", gid, err, resp)
				}
			}
			reset(gid)
			// A prepared TCC before its timeout is looked at at once, and
			// left alone: its caller may still register branches.
			gid = dtmcli.MustGenGid(dtm)
			tcc := &dtmcli.Tcc{TransBase: *dtmimp.NewTransBase(gid, "tcc", dtm, "")}
			tcc.TimeoutToFail = 3600
			if err := dtmimp.TransCallDtm(&tcc.TransBase, "prepare"); err != nil {
				t.Fatal(err)
			}
			reset(gid)
			deadline := time.Now().Add(settle)
			for {
				q, err := dtxtest.Query(ctx, dtm, gid)
				if err != nil {
					t.Fatal(err)
				}
				if q.Status() != "prepared" {
					t.Fatalf("a reset prepared TCC became %s (%s)", q.Status(), q.Transaction.RollbackReason)
				}
				// Recovery has seen it once it put the next look back at the timeout.
				if nc := q.Transaction.NextCronTime; nc != nil && time.Until(*nc) > time.Hour/2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("recovery did not look at the reset TCC (next look %v)", q.Transaction.NextCronTime)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := tccBody(tcc, nil); err != nil {
				t.Fatal(err)
			}
			if err := dtmimp.TransCallDtm(&tcc.TransBase, "submit"); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOutTry": 1, "TransInTry": 1, "TransOutConfirm": 1, "TransInConfirm": 1})
		})
	})
}
