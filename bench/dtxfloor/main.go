// Command dtxfloor is a diagnostic for bench/dtx, not a coordinator: the
// least that any coordinator must do for the bench's two-branch saga. It
// reads the submit, makes --syncs synced writes (the first before the first
// action, the rest before the answer; each its own O_DIRECT|O_DSYNC pwrite
// of one 4 KiB block, never grouped, so no write waits for another or for
// company), calls the two actions over kept-alive connections, and answers.
// It keeps no state, recovers nothing and exposes no metrics.
//
// Run it in place of the second sluice of an A/B, so that it is measured in
// the same run as sluice and as the no-coordinator baseline:
//
//	go build -o bin/dtx-floor ./bench/dtxfloor
//	SKIP_DTM=1 ./bench/dtx.sh -sluice-b bin/dtx-floor -sluice-b-args "--syncs 2" \
//	    -only "no coordinator, 2 SQL,sluice, 2 SQL,sluice B, 2 SQL"
//
// With --syncs 0 it measures what the extra HTTP exchange alone costs; with
// 2, the floor for a coordinator that makes a saga durable before its first
// branch call and its outcome durable before the answer, as sluice does.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

const (
	block  = 4096
	blocks = 4096 // the log file's size in blocks; writes go round it
)

type floor struct {
	syncs int
	log   *os.File
	next  atomic.Int64
	bufs  sync.Pool
	pools sync.Map // host -> chan *branchConn
}

func main() {
	// bench/dtx starts its coordinators as "BIN dtx serve --listen ... --store ...".
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "dtx" && args[1] == "serve" {
		args = args[2:]
	}
	fs := flag.NewFlagSet("dtxfloor", flag.ExitOnError)
	syncs := fs.Int("syncs", 2, "synced writes per saga: the first before the first action, the rest before the answer")
	listen := fs.String("listen", "127.0.0.1:36789", "address to serve on")
	store := fs.String("store", "bolt:///tmp/dtxfloor.db", "the log goes to this path plus .floorlog (as bench/dtx passes a bolt URL)")
	fs.String("log-level", "", "ignored (bench/dtx passes it)")
	_ = fs.Parse(args)
	// run serves until it fails.
	fmt.Fprintln(os.Stderr, "dtxfloor:", run(*syncs, *listen, strings.TrimPrefix(*store, "bolt://")+".floorlog"))
	os.Exit(2)
}

func run(syncs int, listen, path string) error {
	fl, err := newFloor(syncs, path)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return fl.serveListener(ln)
}

func newFloor(syncs int, path string) (*floor, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_DIRECT|syscall.O_DSYNC, 0o644)
	if err != nil {
		return nil, err
	}
	fl := &floor{syncs: syncs, log: f}
	fl.bufs.New = func() any { b := alignedBlock(); return &b }
	// Write every block once first, so that later writes overwrite
	// allocated, written blocks and need no file-system metadata change:
	// the cheapest synced write the file system offers.
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, blocks*block); err != nil {
		f.Close()
		return nil, err
	}
	b := alignedBlock()
	for i := 0; i < blocks; i++ {
		if _, err := f.WriteAt(b, int64(i)*block); err != nil {
			f.Close()
			return nil, err
		}
	}
	return fl, nil
}

func (fl *floor) serveListener(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go fl.serve(c)
	}
}

// alignedBlock is a block-sized buffer at a block-aligned address, as O_DIRECT needs.
func alignedBlock() []byte {
	b := make([]byte, 2*block)
	off := block - int(uintptr(unsafe.Pointer(&b[0]))&(block-1))
	return b[off : off+block]
}

func (fl *floor) durable(gid string) error {
	bp := fl.bufs.Get().(*[]byte)
	defer fl.bufs.Put(bp)
	copy(*bp, gid)
	_, err := fl.log.WriteAt(*bp, (fl.next.Add(1)%blocks)*block)
	return err
}

// readMessage reads one HTTP/1.1 message with a Content-Length body (the
// bench's client and business service send nothing else): its first line
// and its body.
func readMessage(br *bufio.Reader) (first string, body []byte, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", nil, err
	}
	first = string(line)
	n := 0
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return "", nil, err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := strings.Cut(string(h), ":"); ok && strings.EqualFold(k, "content-length") {
			if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return "", nil, err
			}
		}
	}
	body = make([]byte, n)
	_, err = io.ReadFull(br, body)
	return first, body, err
}

type submit struct {
	Gid      string              `json:"gid"`
	Steps    []map[string]string `json:"steps"`
	Payloads []string            `json:"payloads"`
}

func (fl *floor) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	out := make([]byte, 0, 256)
	for {
		first, body, err := readMessage(br)
		if err != nil {
			return
		}
		code, answer := "200 OK", `{"dtm_result":"SUCCESS"}`
		f := strings.Fields(first)
		switch {
		case len(f) >= 2 && strings.HasSuffix(f[1], "/submit"):
			var s submit
			if err := json.Unmarshal(body, &s); err != nil || len(s.Payloads) < len(s.Steps) {
				code, answer = "400 Bad Request", `{"error":"malformed submit"}`
			} else if err := fl.saga(&s); err != nil {
				code, answer = "409 Conflict", `{"dtm_result":"FAILURE"}`
			}
		case len(f) >= 2 && strings.Contains(f[1], "/newGid"):
			answer = `{"gid":"floor","dtm_result":"SUCCESS"}`
		}
		out = append(out[:0], "HTTP/1.1 "+code+"\r\nContent-Type: application/json\r\nContent-Length: "...)
		out = strconv.AppendInt(out, int64(len(answer)), 10)
		out = append(out, "\r\n\r\n"+answer...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (fl *floor) saga(s *submit) error {
	if fl.syncs > 0 {
		if err := fl.durable(s.Gid); err != nil {
			return err
		}
	}
	for i, st := range s.Steps {
		if err := fl.call(st["action"], s.Payloads[i]); err != nil {
			return err
		}
	}
	for i := 1; i < fl.syncs; i++ {
		if err := fl.durable(s.Gid); err != nil {
			return err
		}
	}
	return nil
}

type branchConn struct {
	c  net.Conn
	br *bufio.Reader
}

var errFailure = errors.New("branch answered FAILURE")

func (fl *floor) call(raw, payload string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	pv, _ := fl.pools.LoadOrStore(u.Host, make(chan *branchConn, 256))
	pool := pv.(chan *branchConn)
	var bc *branchConn
	select {
	case bc = <-pool:
	default:
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			return err
		}
		bc = &branchConn{c: c, br: bufio.NewReader(c)}
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, len(payload), payload)
	if _, err := bc.c.Write(req.Bytes()); err != nil {
		bc.c.Close()
		return err
	}
	first, body, err := readMessage(bc.br)
	if err != nil {
		bc.c.Close()
		return err
	}
	select {
	case pool <- bc:
	default:
		bc.c.Close()
	}
	if !strings.Contains(first, " 200 ") || bytes.Contains(body, []byte("FAILURE")) {
		return errFailure
	}
	return nil
}
