package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

// The log records and the bolt values are a hand-written binary encoding:
// encoding/json's reflection was most of the store's CPU besides the
// fdatasync (about a fifth of it in the saga benchmark). Every encoded value
// starts with a version byte; the JSON that earlier versions wrote starts
// with '{', so both are read, and files written before stay readable.
//
// Integers are varints, strings and byte slices are a length and the
// bytes, times are their nanosecond plus one (0: the zero time) and their
// Unix second. Times come back in UTC, as the store keeps them.
const (
	verJSON = '{'
	// verBinary: a row alone (a bolt value of the older layout, row.go);
	// also the log records of the first binary version, whose branches
	// carry every field: read, no longer written.
	verBinary = 1
	// verTxnPlain: a transaction's value whose branches carry every field:
	// read, no longer written.
	verTxnPlain = 2
	verRecord   = 3 // a log record
	verTxn      = 4 // a transaction's value, row.go
)

var errCorrupt = errors.New("truncated or corrupt binary value")

type enc []byte

func (e *enc) uint(v uint64) { *e = binary.AppendUvarint(*e, v) }
func (e *enc) int(v int64)   { *e = binary.AppendVarint(*e, v) }

func (e *enc) str(s string) {
	e.uint(uint64(len(s)))
	*e = append(*e, s...)
}

func (e *enc) bytes(b []byte) {
	e.uint(uint64(len(b)))
	*e = append(*e, b...)
}

func (e *enc) time(t time.Time) {
	if t.IsZero() {
		e.uint(0)
		return
	}
	e.uint(uint64(t.Nanosecond()) + 1)
	e.int(t.Unix())
}

func (e *enc) strMap(m map[string]string) {
	e.uint(uint64(len(m)))
	for k, v := range m {
		e.str(k)
		e.str(v)
	}
}

func boolBit(b bool, bit byte) byte {
	if b {
		return bit
	}
	return 0
}

func (e *enc) global(g *dtx.Global) {
	e.str(g.Gid)
	e.str(g.TransType)
	e.str(g.Status)
	e.uint(uint64(len(g.Steps)))
	for _, s := range g.Steps {
		e.strMap(s)
	}
	e.uint(uint64(len(g.Payloads)))
	for _, p := range g.Payloads {
		e.str(p)
	}
	e.str(g.QueryPrepared)
	e.str(g.Protocol)
	e.str(g.CustomData)
	o := &g.Options
	*e = append(*e, boolBit(o.WaitResult, 1)|boolBit(o.Concurrent, 2))
	e.int(o.TimeoutToFail)
	e.int(o.RequestTimeout)
	e.int(o.RetryInterval)
	e.strMap(o.BranchHeaders)
	e.int(o.RetryLimit)
	e.int(o.RetryCount)
	e.time(g.CreateTime)
	e.time(g.UpdateTime)
	e.time(g.FinishTime)
	e.time(g.RollbackTime)
	e.str(g.RollbackReason)
	e.str(g.Result)
	e.time(g.NextCronTime)
	e.int(int64(g.Retries))
	e.str(g.Owner)
	e.time(g.LeaseUntil)
	e.str(g.Stuck)
	e.uint(uint64(len(g.BranchStatus)))
	for k, v := range g.BranchStatus {
		e.str(k)
		e.str(v.Status)
		e.time(v.FinishTime)
	}
}

// Branch flags: what a branch shares with the row it is encoded with.
// GenBranches copies the gid, and each step's payload and URLs, into its
// branches; left out, they were more than half of a saga's bytes.
const (
	brGid  = 1 // Gid is the row's
	brData = 2 // BinData is the row's Payloads[stepIndex(BranchID)]
	brURL  = 4 // URL is the row's Steps[stepIndex(BranchID)][Op]
)

// stepIndex is the step a branch id names ("01" is step 0), or -1.
func stepIndex(id string) int {
	if len(id) == 0 || len(id) > 6 {
		return -1
	}
	n := 0
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return -1
		}
		n = n*10 + int(id[i]-'0')
	}
	return n - 1
}

// branchFlags tells what b shares with g (nil: nothing).
func branchFlags(g *dtx.Global, b *dtx.Branch) byte {
	if g == nil {
		return 0
	}
	var f byte
	if b.Gid == g.Gid {
		f |= brGid
	}
	if k := stepIndex(b.BranchID); k >= 0 {
		if k < len(g.Payloads) && len(b.BinData) > 0 && string(b.BinData) == g.Payloads[k] {
			f |= brData
		}
		if k < len(g.Steps) && b.URL != "" {
			if u, ok := g.Steps[k][b.Op]; ok && u == b.URL {
				f |= brURL
			}
		}
	}
	return f
}

// plainBranch encodes b without flags, as a verBinary branch value.
func (e *enc) plainBranch(b *dtx.Branch) {
	e.str(b.Gid)
	e.str(b.BranchID)
	e.str(b.Op)
	e.str(b.URL)
	e.bytes(b.BinData)
	e.str(b.Status)
	e.time(b.CreateTime)
	e.time(b.FinishTime)
}

// branch encodes b, leaving out what it shares with g (nil: nothing).
func (e *enc) branch(g *dtx.Global, b *dtx.Branch) {
	f := branchFlags(g, b)
	*e = append(*e, f)
	if f&brGid == 0 {
		e.str(b.Gid)
	}
	e.str(b.BranchID)
	e.str(b.Op)
	if f&brURL == 0 {
		e.str(b.URL)
	}
	if f&brData == 0 {
		e.bytes(b.BinData)
	}
	e.str(b.Status)
	e.time(b.CreateTime)
	e.time(b.FinishTime)
}

func (e *enc) branches(g *dtx.Global, bs []dtx.Branch) {
	e.uint(uint64(len(bs)))
	for i := range bs {
		e.branch(g, &bs[i])
	}
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *dec) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads a length that must fit in what is left (each element takes
// at least min bytes), so a corrupt value cannot make us allocate much.
func (d *dec) count(min int) int {
	n := d.uint()
	if n > uint64(len(d.b)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) raw() []byte {
	n := d.count(1)
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) str() string { return string(d.raw()) }

func (d *dec) bytes() []byte {
	if p := d.raw(); len(p) > 0 {
		return append([]byte(nil), p...)
	}
	return nil // as encoding/json left an omitted bin_data
}

func (d *dec) time() time.Time {
	ns := d.uint()
	if ns == 0 {
		return time.Time{}
	}
	if ns > 1e9 {
		d.fail()
		return time.Time{}
	}
	sec := d.int()
	return time.Unix(sec, int64(ns-1)).UTC()
}

// strMap returns nil for no entries unless keep (a step is an object even
// when empty, as encoding/json decoded it).
func (d *dec) strMap(keep bool) map[string]string {
	n := d.count(2)
	if n == 0 && !keep {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := d.str()
		m[k] = d.str()
	}
	return m
}

func (d *dec) global(g *dtx.Global) {
	g.Gid = d.str()
	g.TransType = d.str()
	g.Status = d.str()
	if n := d.count(1); n > 0 {
		g.Steps = make([]map[string]string, n)
		for i := range g.Steps {
			g.Steps[i] = d.strMap(true)
		}
	}
	if n := d.count(1); n > 0 {
		g.Payloads = make([]string, n)
		for i := range g.Payloads {
			g.Payloads[i] = d.str()
		}
	}
	g.QueryPrepared = d.str()
	g.Protocol = d.str()
	g.CustomData = d.str()
	o := &g.Options
	flags := d.byte()
	o.WaitResult, o.Concurrent = flags&1 != 0, flags&2 != 0
	o.TimeoutToFail = d.int()
	o.RequestTimeout = d.int()
	o.RetryInterval = d.int()
	o.BranchHeaders = d.strMap(false)
	o.RetryLimit = d.int()
	o.RetryCount = d.int()
	g.CreateTime = d.time()
	g.UpdateTime = d.time()
	g.FinishTime = d.time()
	g.RollbackTime = d.time()
	g.RollbackReason = d.str()
	g.Result = d.str()
	g.NextCronTime = d.time()
	if r := d.int(); r >= math.MinInt32 && r <= math.MaxInt32 {
		g.Retries = int(r)
	} else {
		d.fail()
	}
	g.Owner = d.str()
	g.LeaseUntil = d.time()
	g.Stuck = d.str()
	if n := d.count(3); n > 0 {
		g.BranchStatus = make(map[string]dtx.BranchState, n)
		for i := 0; i < n; i++ {
			k := d.str()
			g.BranchStatus[k] = dtx.BranchState{Status: d.str(), FinishTime: d.time()}
		}
	}
}

// branch decodes a branch encoded with g (nil: nothing left out); plain:
// the encoding without flags (verBinary records, verTxnPlain values).
func (d *dec) branch(g *dtx.Global, b *dtx.Branch, plain bool) {
	var f byte
	if !plain {
		f = d.byte()
	}
	if f&^(brGid|brData|brURL) != 0 || (f != 0 && g == nil) {
		d.fail()
		return
	}
	if f&brGid != 0 {
		b.Gid = g.Gid
	} else {
		b.Gid = d.str()
	}
	b.BranchID = d.str()
	b.Op = d.str()
	k := stepIndex(b.BranchID)
	if f&brURL == 0 {
		b.URL = d.str()
	} else if k >= 0 && k < len(g.Steps) {
		b.URL = g.Steps[k][b.Op]
	} else {
		d.fail()
	}
	if f&brData == 0 {
		b.BinData = d.bytes()
	} else if k >= 0 && k < len(g.Payloads) {
		b.BinData = []byte(g.Payloads[k])
	} else {
		d.fail()
	}
	b.Status = d.str()
	b.CreateTime = d.time()
	b.FinishTime = d.time()
}

func (d *dec) branches(g *dtx.Global, plain bool) []dtx.Branch {
	n := d.count(6) // four empty strings and two zero times at least
	if n == 0 {
		return nil
	}
	bs := make([]dtx.Branch, n)
	for i := range bs {
		d.branch(g, &bs[i], plain)
	}
	return bs
}

// Record flags.
const (
	recBody     = 1 // record.Body
	recBranches = 2 // B follows
	recUpdates  = 4 // U follows
)

// bodyOf is the row a record's branches are encoded with: its own, unless
// it left the body out (then its steps and payloads are not in it).
func bodyOf(r *record) *dtx.Global {
	if r.Body {
		return nil
	}
	return r.G
}

// appendRecord encodes r after buf.
func appendRecord(buf []byte, r *record) []byte {
	e := enc(append(buf, verRecord))
	var flags byte
	if r.Body {
		flags |= recBody
	}
	if r.B != nil {
		flags |= recBranches
	} else if len(r.U) > 0 {
		flags |= recUpdates
	}
	e = append(e, flags)
	e.global(r.G)
	switch {
	case flags&recBranches != 0:
		e.branches(bodyOf(r), r.B)
	case flags&recUpdates != 0:
		e.uint(uint64(len(r.U)))
		for _, u := range r.U {
			e.str(u.BranchID)
			e.str(u.Op)
			e.str(u.Status)
			e.time(u.FinishTime)
		}
	}
	return e
}

// decodeRecord reads a record in either format.
func decodeRecord(p []byte) (*record, error) {
	r := &record{}
	if len(p) > 0 && p[0] == verJSON {
		if err := json.Unmarshal(p, r); err != nil {
			return nil, err
		}
		if r.G == nil {
			return nil, errCorrupt
		}
		return r, nil
	}
	if len(p) < 2 || (p[0] != verRecord && p[0] != verBinary) {
		return nil, errCorrupt
	}
	plain := p[0] == verBinary
	flags := p[1]
	d := dec{b: p[2:]}
	r.G = &dtx.Global{}
	d.global(r.G)
	r.Body = flags&recBody != 0
	switch {
	case flags&recBranches != 0:
		r.B = d.branches(bodyOf(r), plain)
		if r.B == nil {
			r.B = []dtx.Branch{}
		}
	case flags&recUpdates != 0:
		n := d.count(4)
		r.U = make([]dtx.BranchUpdate, n)
		for i := range r.U {
			r.U[i] = dtx.BranchUpdate{BranchID: d.str(), Op: d.str(), Status: d.str(), FinishTime: d.time()}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	return r, d.err
}

// encodeGlobal is a bolt global value.
func encodeGlobal(g *dtx.Global) []byte {
	e := enc(make([]byte, 0, 256))
	e = append(e, verBinary)
	e.global(g)
	return e
}

// decodeGlobal reads the row of a bolt global value in any format (of a
// verTxn value, the row without the branches that follow it).
func decodeGlobal(v []byte) (*dtx.Global, error) {
	g := &dtx.Global{}
	if len(v) > 0 && v[0] == verJSON {
		return g, json.Unmarshal(v, g)
	}
	if len(v) == 0 || (v[0] != verBinary && v[0] != verTxnPlain && v[0] != verTxn) {
		return nil, errCorrupt
	}
	d := dec{b: v[1:]}
	d.global(g)
	return g, d.err
}

// encodeBranch is a bolt branch value.
func encodeBranch(b *dtx.Branch) []byte {
	e := enc(make([]byte, 0, 160))
	e = append(e, verBinary)
	e.plainBranch(b)
	return e
}

// decodeBranch reads a bolt branch value in either format.
func decodeBranch(v []byte) (dtx.Branch, error) {
	var b dtx.Branch
	if len(v) > 0 && v[0] == verJSON {
		return b, json.Unmarshal(v, &b)
	}
	if len(v) == 0 || v[0] != verBinary {
		return b, errCorrupt
	}
	d := dec{b: v[1:]}
	d.branch(nil, &b, true)
	return b, d.err
}
