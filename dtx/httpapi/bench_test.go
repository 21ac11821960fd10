package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/httpapi"
)

// nullStore accepts every mutation without keeping anything. It is for the
// benchmark only: it takes the store (which dtx/boltstore's own benchmarks
// measure) out of the figure, so that what is left is serving the request
// and driving the branches.
type nullStore struct{}

func (nullStore) Apply(_ context.Context, muts []*dtx.Mutation) ([]error, error) {
	return make([]error, len(muts)), nil
}
func (nullStore) Get(context.Context, string) (*dtx.Global, []dtx.Branch, error) {
	return nil, nil, dtx.ErrNotFound
}
func (nullStore) Claim(context.Context, string, time.Time, time.Time, int) ([]*dtx.Global, error) {
	return nil, nil
}
func (nullStore) List(context.Context, string, int, string, string) ([]*dtx.Global, error) {
	return nil, nil
}
func (nullStore) Purge(context.Context, time.Time, int) (int, error) { return 0, nil }
func (nullStore) Close() error                                       { return nil }

// BenchmarkSubmit serves a two-step saga submitted with wait_result, as the
// 2-SQL row of bench/dtx.sh sends it, over loopback HTTP to a real
// coordinator whose branches answer SUCCESS from a local HTTP server. The
// client writes the bytes dtm's client (go-resty) sends on a keep-alive
// connection and reads the reply with net/http's parser, so that its own
// cost stays small and the same before and after a change of the server.
// cpu-us/op is the CPU of the whole process (coordinator, branch server and
// client) per saga, from getrusage.
func BenchmarkSubmit(b *testing.B) {
	for _, lean := range []bool{false, true} {
		suffix := ""
		if lean {
			suffix = ",server=lean" // httpapi.Server instead of a plain http.Server
		}
		b.Run("store=null"+suffix, func(b *testing.B) { benchSubmit(b, nullStore{}, "submit", lean) })
		b.Run("store=bolt"+suffix, func(b *testing.B) {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "dtx.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			benchSubmit(b, st, "submit", lean)
		})
	}
}

// BenchmarkPrepare prepares a two-step message on the null store: no branch
// is called, so what it measures is mostly serving the request.
func BenchmarkPrepare(b *testing.B) { benchSubmit(b, nullStore{}, "prepare", false) }

// BenchmarkPrepareLean is BenchmarkPrepare served by httpapi.Server.
func BenchmarkPrepareLean(b *testing.B) { benchSubmit(b, nullStore{}, "prepare", true) }

func benchSubmit(b *testing.B, st dtx.Store, op string, lean bool) {
	busi := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
	}))
	defer busi.Close()
	cfg := dtx.DefaultConfig()
	cfg.CommitWorkers = 1 // as sluice dtx serve runs
	coord, err := dtx.New(cfg, st, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := coord.Start(); err != nil {
		b.Fatal(err)
	}
	defer coord.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.Handler(coord, nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if lean {
		ls := httpapi.NewServer(srv, h)
		go func() { _ = ls.Serve(ln) }()
		defer ls.Close()
	} else {
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	addr := ln.Addr().String()

	var seq atomic.Int64
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	request := func() []byte {
		gid := run + "-" + strconv.FormatInt(seq.Add(1), 10)
		// As dtmcli marshals a saga: struct order, options inlined, map keys sorted.
		body := `{"gid":"` + gid + `","trans_type":"saga","wait_result":true,"concurrent":false,"steps":[{"action":"` + busi.URL +
			`/api/busi/TransOut","compensate":"` + busi.URL + `/api/busi/TransOutCompensate"},{"action":"` + busi.URL +
			`/api/busi/TransIn","compensate":"` + busi.URL + `/api/busi/TransInCompensate"}],` +
			`"payloads":["{\"amount\":30,\"user_id\":1}","{\"amount\":30,\"user_id\":2}"],"protocol":"http"}`
		if op == "prepare" {
			body = `{"gid":"` + gid + `","trans_type":"msg","concurrent":false,"steps":[{"action":"` + busi.URL + `/api/busi/TransOut"},{"action":"` +
				busi.URL + `/api/busi/TransIn"}],"payloads":["{\"amount\":30,\"user_id\":1}","{\"amount\":30,\"user_id\":2}"],` +
				`"query_prepared":"` + busi.URL + `/api/busi/QueryPrepared","protocol":"http"}`
		}
		return []byte("POST /api/dtmsvr/" + op + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: go-resty/2.7.0 (https://github.com/go-resty/resty)\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n" + body)
	}
	var failed atomic.Value
	b.SetParallelism(8) // 16 clients on 2 cores: commits are shared, as under load
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			failed.Store(err)
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for pb.Next() {
			if _, err := conn.Write(request()); err != nil {
				failed.Store(err)
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				failed.Store(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != `{"dtm_result":"SUCCESS"}`+"\n" {
				failed.Store(fmt.Errorf("submit: HTTP %d %s", resp.StatusCode, body))
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the user and system CPU the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
