package boltstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

var timeType = reflect.TypeOf(time.Time{})

// fill sets every field reachable from v to a non-zero value derived from
// *n, and fails on a kind it does not know: a field added to the dtx types
// later is filled here, and the round trip below fails until the codec
// carries it too.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch {
	case v.Type() == timeType:
		// UTC without a monotonic reading: how the store keeps times.
		v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(*n), int64(*n)*1001).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n) * 1_000_003)
	case reflect.Uint8:
		v.SetUint(uint64(*n%250 + 1))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := 0; i < 2; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, n)
			fill(t, e, n)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				t.Fatalf("%s.%s: unexported field, teach fill about it", v.Type(), v.Type().Field(i).Name)
			}
			fill(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fill: %s has kind %s; teach fill and the codec about it", v.Type(), v.Kind())
	}
}

func filled[T any](t *testing.T, n *int) T {
	var x T
	fill(t, reflect.ValueOf(&x).Elem(), n)
	return x
}

// TestCodecRoundTrip: every field of Global (with Options and
// BranchStatus), Branch and BranchUpdate survives the binary encoding,
// and JSON written by earlier versions still decodes to the same values.
func TestCodecRoundTrip(t *testing.T) {
	n := 0
	g := filled[dtx.Global](t, &n)
	b := []dtx.Branch{filled[dtx.Branch](t, &n), filled[dtx.Branch](t, &n)}
	u := []dtx.BranchUpdate{filled[dtx.BranchUpdate](t, &n), filled[dtx.BranchUpdate](t, &n)}

	got, err := decodeGlobal(encodeGlobal(&g))
	if err != nil || !reflect.DeepEqual(got, &g) {
		t.Errorf("global:\n got %+v %v\nwant %+v", got, err, &g)
	}
	j, _ := json.Marshal(&g)
	if got, err := decodeGlobal(j); err != nil || !reflect.DeepEqual(got, &g) {
		t.Errorf("global from JSON:\n got %+v %v\nwant %+v", got, err, &g)
	}
	gb, err := decodeBranch(encodeBranch(&b[0]))
	if err != nil || !reflect.DeepEqual(gb, b[0]) {
		t.Errorf("branch:\n got %+v %v\nwant %+v", gb, err, b[0])
	}
	j, _ = json.Marshal(&b[0])
	if gb, err := decodeBranch(j); err != nil || !reflect.DeepEqual(gb, b[0]) {
		t.Errorf("branch from JSON:\n got %+v %v\nwant %+v", gb, err, b[0])
	}
	zero := []*record{{G: &dtx.Global{}, B: make([]dtx.Branch, 3)}, {G: &dtx.Global{}, U: make([]dtx.BranchUpdate, 3)}}
	for _, r := range append([]*record{{G: &g, Body: true, B: b}, {G: &g, U: u}, {G: &g}}, zero...) {
		got, err := decodeRecord(appendRecord([]byte("x"), r)[1:])
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("record:\n got %+v %v\nwant %+v", got, err, r)
		}
		j, _ := json.Marshal(r)
		if got, err := decodeRecord(j); err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("record from JSON:\n got %+v %v\nwant %+v", got, err, r)
		}
	}
	// A truncated value is an error, never a panic or a short value.
	full := appendRecord(nil, &record{G: &g, B: b})
	for i := 0; i < len(full); i++ {
		if _, err := decodeRecord(full[:i]); err == nil {
			t.Fatalf("record cut to %d of %d bytes decoded", i, len(full))
		}
	}
}

// plainBranches encodes bs as the first binary version did: no flags.
func plainBranches(e *enc, bs []dtx.Branch) {
	e.uint(uint64(len(bs)))
	for i := range bs {
		e.plainBranch(&bs[i])
	}
}

// TestCodecSharedFields: a saga's branches leave out the gid, payloads and
// URLs they share with the row (in log records that carry the row's body,
// and in bolt values), come back whole, and the encodings of the first
// binary version (branches with every field) still decode.
func TestCodecSharedFields(t *testing.T) {
	n := 0
	g := filled[dtx.Global](t, &n)
	g.TransType = dtx.TypeSaga
	g.Steps = []map[string]string{{"action": "http://a/1", "compensate": "http://a/-1"}, {"action": "http://a/2", "compensate": "http://a/-2"}}
	g.Payloads = []string{`{"amount":30}`, `{"amount":31}`}
	bs := dtx.GenBranches(&g)
	bs = append(bs, dtx.Branch{Gid: "other", BranchID: "01", Op: dtx.OpAction, URL: "http://b/1", BinData: []byte("x"), Status: "s"})
	for i := range bs {
		bs[i].CreateTime = g.CreateTime
	}

	r := &record{G: &g, B: bs}
	p := appendRecord(nil, r)
	if got, err := decodeRecord(p); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("record:\n got %+v %v\nwant %+v", got, err, r)
	}
	full := enc(nil)
	full.global(&g)
	plainBranches(&full, bs)
	if len(p) >= len(full)-100 {
		t.Errorf("record of %d bytes, %d with every branch field: nothing left out", len(p), len(full))
	}
	// Without the body the branches carry every field.
	rb := &record{G: &g, Body: true, B: bs}
	if got, err := decodeRecord(appendRecord(nil, rb)); err != nil || !reflect.DeepEqual(got, rb) {
		t.Errorf("record without body:\n got %+v %v\nwant %+v", got, err, rb)
	}

	st := &state{g: &g, bs: bs}
	v := encodeTxn(st)
	if len(v) >= len(full)-100 {
		t.Errorf("value of %d bytes, %d with every branch field: nothing left out", len(v), len(full))
	}
	for _, val := range [][]byte{v, append([]byte{verTxnPlain}, full...)} {
		if got := decodeValue(t, val); !reflect.DeepEqual(got, st) {
			t.Errorf("value %d:\n got %+v\nwant %+v", val[0], got, st)
		}
	}

	old := enc{verBinary, recBranches}
	old.global(&g)
	plainBranches(&old, bs)
	if got, err := decodeRecord(old); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("record of the first binary version:\n got %+v %v\nwant %+v", got, err, r)
	}
}

// decodeValue decodes a one-value transaction as load does.
func decodeValue(t *testing.T, v []byte) *state {
	t.Helper()
	r, err := parseRow(v)
	if err != nil || !r.one {
		t.Fatalf("value %d: %v, one value: %v", v[0], err, r != nil && r.one)
	}
	bs, err := r.branches(nil)
	if err != nil {
		t.Fatalf("value %d: %v", v[0], err)
	}
	return &state{g: r.g, bs: bs}
}

// TestSameOptions: sameOptions notices a change in any field of Options,
// including one added later.
func TestSameOptions(t *testing.T) {
	n := 0
	a := filled[dtx.Options](t, &n)
	if b := a; !sameOptions(&a, &b) {
		t.Error("equal options differ")
	}
	for i := 0; i < reflect.TypeOf(a).NumField(); i++ {
		b := a
		b.BranchHeaders = maps.Clone(a.BranchHeaders)
		f := reflect.ValueOf(&b).Elem().Field(i)
		if f.Kind() == reflect.Bool {
			f.SetBool(false)
		} else {
			fill(t, f, &n)
		}
		if sameOptions(&a, &b) {
			t.Errorf("a change of %s went unnoticed", reflect.TypeOf(a).Field(i).Name)
		}
	}
}
