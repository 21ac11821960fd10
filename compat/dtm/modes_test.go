package compat

import (
	"context"
	"database/sql"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dtm-labs/dtm/client/dtmcli"
	"github.com/dtm-labs/dtm/client/dtmcli/dtmimp"
	"github.com/go-resty/resty/v2"

	"github.com/sluice-db/sluice/dtx/dtxtest"
)

const settle = 30 * time.Second // how long a test waits for recovery to finish a transaction

func body(results map[string]string) *dtxtest.Req {
	return &dtxtest.Req{Amount: 30, Results: results}
}

// expect checks the final status and the business effects of gid: each
// handler named ran its business change exactly that many times, and no
// other handler changed anything.
func expect(t *testing.T, dtm, gid, status string, effects map[string]int) {
	t.Helper()
	ctx := context.Background()
	if _, err := dtxtest.WaitStatus(ctx, dtm, gid, settle, status); err != nil {
		t.Fatal(err)
	}
	got, err := dtxtest.Effects(ctx, db, gid)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, effects) {
		t.Fatalf("gid %s: business effects %v, want %v", gid, got, effects)
	}
}

func mustErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

func saga(dtm, gid string, in map[string]string) *dtmcli.Saga {
	s := dtmcli.NewSaga(dtm, gid).
		Add(busi.URL+"/TransOut", busi.URL+"/TransOutCompensate", body(nil)).
		Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(in))
	s.WaitResult = true
	return s
}

func TestSaga(t *testing.T) {
	stores(t, func(t *testing.T, dtm string) {
		t.Run("success", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			if err := saga(dtm, gid, nil).Submit(); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
			q, err := dtxtest.Query(context.Background(), dtm, gid)
			if err != nil {
				t.Fatal(err)
			}
			var st []string
			for _, b := range q.Branches {
				st = append(st, b.BranchID+"/"+b.Op+"/"+b.Status)
			}
			want := []string{"01/compensate/prepared", "01/action/succeed", "02/compensate/prepared", "02/action/succeed"}
			if !reflect.DeepEqual(st, want) {
				t.Fatalf("branches %v, want %v", st, want)
			}
		})
		t.Run("failure compensates in reverse", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			mustErr(t, saga(dtm, gid, map[string]string{"TransIn": "FAILURE"}).Submit(), "FAILURE")
			// TransInCompensate was called for the failed action, and the
			// barrier made it a null compensation.
			expect(t, dtm, gid, "failed", map[string]int{"TransOut": 1, "TransOutCompensate": 1})
		})
		t.Run("ongoing", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			// dtm answers 409 while a waited-for saga is still running.
			mustErr(t, saga(dtm, gid, map[string]string{"TransIn": "ONGOINGx2"}).Submit(), "wait result not return success")
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
		})
		t.Run("errors are retried", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := saga(dtm, gid, map[string]string{"TransIn": "ERRORx2"})
			s.WaitResult = false
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 1})
		})
		t.Run("timeout", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := saga(dtm, gid, map[string]string{"TransIn": "ONGOING"})
			s.TimeoutToFail = 1
			mustErr(t, s.Submit(), "wait result not return success")
			expect(t, dtm, gid, "failed", map[string]int{"TransOut": 1, "TransOutCompensate": 1})
		})
		t.Run("concurrent with branch orders", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := dtmcli.NewSaga(dtm, gid).
				Add(busi.URL+"/TransOut", busi.URL+"/TransOutCompensate", body(nil)).
				Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(nil)).
				Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(nil)).
				AddBranchOrder(2, []int{0, 1}).SetConcurrent()
			s.WaitResult = true
			if err := s.Submit(); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOut": 1, "TransIn": 2})
		})
		t.Run("concurrent failure", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			s := dtmcli.NewSaga(dtm, gid).
				Add(busi.URL+"/TransOut", busi.URL+"/TransOutCompensate", body(nil)).
				Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(nil)).
				Add(busi.URL+"/TransIn", busi.URL+"/TransInCompensate", body(map[string]string{"TransIn": "FAILURE"})).
				AddBranchOrder(2, []int{0, 1}).SetConcurrent()
			s.WaitResult = true
			mustErr(t, s.Submit(), "FAILURE")
			expect(t, dtm, gid, "failed", map[string]int{"TransOut": 1, "TransIn": 1, "TransOutCompensate": 1, "TransInCompensate": 1})
		})
	})
}

func tccBody(tcc *dtmcli.Tcc, results map[string]string) (*resty.Response, error) {
	resp, err := tcc.CallBranch(body(results), busi.URL+"/TransOutTry", busi.URL+"/TransOutConfirm", busi.URL+"/TransOutCancel")
	if err != nil {
		return resp, err
	}
	return tcc.CallBranch(body(results), busi.URL+"/TransInTry", busi.URL+"/TransInConfirm", busi.URL+"/TransInCancel")
}

func waitTCC(t *dtmcli.Tcc) { t.WaitResult = true }

func TestTCC(t *testing.T) {
	stores(t, func(t *testing.T, dtm string) {
		t.Run("success", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			err := dtmcli.TccGlobalTransaction2(dtm, gid, waitTCC, func(tcc *dtmcli.Tcc) (*resty.Response, error) {
				return tccBody(tcc, nil)
			})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"TransOutTry": 1, "TransInTry": 1, "TransOutConfirm": 1, "TransInConfirm": 1})
		})
		t.Run("failure cancels", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			err := dtmcli.TccGlobalTransaction2(dtm, gid, waitTCC, func(tcc *dtmcli.Tcc) (*resty.Response, error) {
				return tccBody(tcc, map[string]string{"TransInTry": "FAILURE"})
			})
			mustErr(t, err, "FAILURE")
			expect(t, dtm, gid, "failed", map[string]int{"TransOutTry": 1, "TransOutCancel": 1})
		})
		t.Run("ongoing", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			err := dtmcli.TccGlobalTransaction2(dtm, gid, waitTCC, func(tcc *dtmcli.Tcc) (*resty.Response, error) {
				return tccBody(tcc, map[string]string{"TransOutConfirm": "ONGOINGx2"})
			})
			mustErr(t, err, "ONGOING")
			expect(t, dtm, gid, "succeed", map[string]int{"TransOutTry": 1, "TransInTry": 1, "TransOutConfirm": 1, "TransInConfirm": 1})
		})
		t.Run("timeout of a vanished caller", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			tcc := &dtmcli.Tcc{TransBase: *dtmimp.NewTransBase(gid, "tcc", dtm, "")}
			tcc.TimeoutToFail = 1
			if err := dtmimp.TransCallDtm(&tcc.TransBase, "prepare"); err != nil {
				t.Fatal(err)
			}
			if _, err := tcc.CallBranch(body(nil), busi.URL+"/TransOutTry", busi.URL+"/TransOutConfirm", busi.URL+"/TransOutCancel"); err != nil {
				t.Fatal(err)
			}
			// The caller never submits: after timeout_to_fail the coordinator cancels.
			expect(t, dtm, gid, "failed", map[string]int{"TransOutTry": 1, "TransOutCancel": 1})
		})
	})
}

// msgLocal is a message's local transaction: the money leaves OutUser.
func msgLocal(gid string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE "+dtxtest.Schema+".user_account SET balance = balance - 30 WHERE user_id = ?", dtxtest.OutUser)
		if err == nil {
			_, err = tx.Exec("INSERT INTO "+dtxtest.Schema+".user_log (gid, branch_id, op, handler, user_id, amount) VALUES (?, '00', 'msg', 'MsgLocal', ?, 30)", gid, dtxtest.OutUser)
		}
		return err
	}
}

func TestMsg(t *testing.T) {
	stores(t, func(t *testing.T, dtm string) {
		qp := busi.URL + "/QueryPrepared"
		t.Run("success", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			msg := dtmcli.NewMsg(dtm, gid).Add(busi.URL+"/TransIn", body(nil))
			msg.WaitResult = true
			if err := msg.DoAndSubmitDB(qp, db, msgLocal(gid)); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "succeed", map[string]int{"MsgLocal": 1, "TransIn": 1})
		})
		t.Run("failure of the local transaction", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			msg := dtmcli.NewMsg(dtm, gid).Add(busi.URL+"/TransIn", body(nil))
			err := msg.DoAndSubmitDB(qp, db, func(tx *sql.Tx) error { return dtmcli.ErrFailure })
			mustErr(t, err, "FAILURE")
			expect(t, dtm, gid, "failed", map[string]int{})
		})
		t.Run("ongoing", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			msg := dtmcli.NewMsg(dtm, gid).Add(busi.URL+"/TransIn", body(map[string]string{"TransIn": "ONGOINGx2"}))
			msg.WaitResult = true
			mustErr(t, msg.DoAndSubmitDB(qp, db, msgLocal(gid)), "ONGOING")
			expect(t, dtm, gid, "succeed", map[string]int{"MsgLocal": 1, "TransIn": 1})
		})
		t.Run("timeout: committed, caller vanished", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			msg := dtmcli.NewMsg(dtm, gid).Add(busi.URL+"/TransIn", body(nil))
			msg.TimeoutToFail = 1
			if err := msg.Prepare(qp); err != nil {
				t.Fatal(err)
			}
			bb, err := dtmcli.BarrierFrom("msg", gid, "00", "msg")
			if err != nil {
				t.Fatal(err)
			}
			if err := bb.CallWithDB(db, msgLocal(gid)); err != nil {
				t.Fatal(err)
			}
			// No submit: the query-prepared back-check finds the commit.
			expect(t, dtm, gid, "succeed", map[string]int{"MsgLocal": 1, "TransIn": 1})
		})
		t.Run("timeout: never committed", func(t *testing.T) {
			gid := dtmcli.MustGenGid(dtm)
			msg := dtmcli.NewMsg(dtm, gid).Add(busi.URL+"/TransIn", body(nil))
			msg.TimeoutToFail = 1
			if err := msg.Prepare(qp); err != nil {
				t.Fatal(err)
			}
			expect(t, dtm, gid, "failed", map[string]int{})
			// The late local transaction is refused by the barrier.
			bb, _ := dtmcli.BarrierFrom("msg", gid, "00", "msg")
			if err := bb.CallWithDB(db, msgLocal(gid)); err != dtmcli.ErrDuplicated {
				t.Fatalf("late local transaction: %v, want ErrDuplicated", err)
			}
			expect(t, dtm, gid, "failed", map[string]int{})
		})
	})
}

// TestQueryShape checks the contract later checks rely on.
func TestQueryShape(t *testing.T) {
	stores(t, func(t *testing.T, dtm string) {
		gid := dtmcli.MustGenGid(dtm)
		if err := saga(dtm, gid, nil).Submit(); err != nil {
			t.Fatal(err)
		}
		var q map[string]any
		resp, err := dtmcli.GetRestyClient().R().SetResult(&q).SetQueryParam("gid", gid).Get(dtm + "/query")
		if err != nil || resp.StatusCode() != 200 {
			t.Fatalf("query: %v %v", err, resp)
		}
		tr, _ := q["transaction"].(map[string]any)
		if tr["status"] != "succeed" || tr["gid"] != gid || tr["trans_type"] != "saga" {
			t.Fatalf("transaction %v", tr)
		}
		if bs, _ := q["branches"].([]any); len(bs) != 4 {
			t.Fatalf("branches %v", q["branches"])
		}
	})
}
