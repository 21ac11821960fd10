package dtx_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestBusiAccountsPerRequest: the business service moves money on the
// accounts each request names. It once kept the first request's accounts
// for every later one, which put the whole benchmark on one hot row.
func TestBusiAccountsPerRequest(t *testing.T) {
	sandboxtest.SkipShort(t)
	ctx := context.Background()
	if err := dtxtest.AddAccounts(ctx, db, 900, 903, 50); err != nil {
		t.Fatal(err)
	}
	for i, u := range []int{900, 901} {
		body := fmt.Sprintf(`{"amount":7,"out_user":%d,"in_user":%d}`, u, u+2)
		for j, h := range []string{"TransOut", "TransIn"} {
			url := fmt.Sprintf("%s/%s?gid=acct-%d&trans_type=saga&branch_id=0%d&op=action", busi.URL, h, i, j+1)
			resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s for account %d: HTTP %d %s", h, u, resp.StatusCode, b)
			}
		}
	}
	want := map[int]int64{900: 43, 901: 43, 902: 57, 903: 57}
	for u, w := range want {
		var got int64
		if err := db.QueryRowContext(ctx, "SELECT balance FROM "+dtxtest.Schema+".user_account WHERE user_id = ?", u).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("account %d has %d, want %d", u, got, w)
		}
	}
}
