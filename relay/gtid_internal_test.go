package relay

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestGTIDTrackerMatchesTextPath: the reader's GTID tracking of MariaDB
// groups (a GTID kept as a struct and added to the set directly) gives the
// same set text after every transaction as the text round trip it replaced
// (Sprintf, then add: parse and MariadbGTIDSet.String), on seeded random
// groups: several domains (10 sorts before 2 as text), server ids that
// change, sequence numbers that go back (a failover), the zero GTID, and
// a start set of two domains.
func TestGTIDTrackerMatchesTextPath(t *testing.T) {
	seed := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seed))
	for _, start := range []string{"", "0-1-5", "2-3-100,10-1-7"} {
		got, err := newGTIDTracker("mariadb", start)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := newGTIDTracker("mariadb", start)
		if err != nil {
			t.Fatal(err)
		}
		seqs := map[uint32]uint64{}
		for i := 0; i < 2000; i++ {
			domain := []uint32{0, 1, 2, 10}[r.Intn(4)]
			server := uint32(1 + r.Intn(3))
			seqs[domain] += uint64(1 + r.Intn(3))
			seq := seqs[domain]
			switch r.Intn(20) {
			case 0:
				seq = uint64(r.Intn(int(seq) + 1)) // back: a failover, or a repeat
			case 1:
				domain, server, seq = 0, 0, 0
			}
			body := make([]byte, 13)
			binary.LittleEndian.PutUint64(body, seq)
			binary.LittleEndian.PutUint32(body[8:], domain)
			h, raw := event(replication.MARIADB_GTID_EVENT, body)
			h.ServerID = server
			got.onEvent(h, raw, false, false)
			ref.pending = fmt.Sprintf("%d-%d-%d", domain, server, seq)
			xh, xraw := event(replication.XID_EVENT, make([]byte, 8))
			got.onEvent(xh, xraw, false, true)
			ref.add(ref.pending, false)
			ref.pending = ""
			if got.text != ref.text || got.set.String() != ref.set.String() {
				t.Fatalf("seed %d, start %q, group %d (%d-%d-%d): set %q (%q), the text path's %q (%q)",
					seed, start, i, domain, server, seq, got.text, got.set.String(), ref.text, ref.set.String())
			}
		}
	}
}
