package dtx

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// TestGlobalJSONKeepsBinaryPayloads: a gRPC saga's payloads are protobuf
// bytes, which plain JSON strings would corrupt; every byte comes back, and
// UTF-8 payloads are stored as before.
func TestGlobalJSONKeepsBinaryPayloads(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 200; i++ {
		g := Global{Gid: "g", TransType: TypeSaga, Status: StatusSubmitted, Protocol: "grpc"}
		for j := rng.Intn(4); j >= 0; j-- {
			b := make([]byte, rng.Intn(40))
			rng.Read(b)
			g.Payloads = append(g.Payloads, string(b))
		}
		doc, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var back Global
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(back.Payloads, g.Payloads) {
			t.Fatalf("seed %d: payloads %q came back as %q", seed, g.Payloads, back.Payloads)
		}
	}
	doc, _ := json.Marshal(Global{Gid: "g", Payloads: []string{`{"amount":30}`}})
	var m map[string]any
	_ = json.Unmarshal(doc, &m)
	if _, b64 := m["payloads_b64"]; b64 || m["payloads"] == nil {
		t.Fatalf("UTF-8 payloads stored as %s", doc)
	}
}
