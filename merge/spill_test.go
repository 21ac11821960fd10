package merge

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// TestSpillFileRoundTrip: a spilled transaction's file is private (0600),
// gives back its events byte for byte and in order (an event larger than
// the read buffer included), and is gone once removed; resetSpillDir
// empties what a dead process left.
func TestSpillFileRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "merge-spill")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "txn-left-by-a-crash"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetSpillDir(dir); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("resetSpillDir left %d files", len(ents))
	}
	s, err := newSpillFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("spill file mode %v, want 0600", st.Mode().Perm())
	}
	var want [][]byte
	for i, n := range []int{13, 1 << 20, 0, 300 << 10, 7} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		ev := encode(replication.WRITE_ROWS_EVENTv1, 1, 2, 0, b, 0)
		want = append(want, ev)
		if err := s.write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.done(); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	i := 0
	err = s.each(&buf, func(raw []byte) error {
		if i >= len(want) || !bytes.Equal(raw, want[i]) {
			t.Fatalf("event %d read back differs (%d bytes)", i, len(raw))
		}
		i++
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("read back %d of %d events: %v", i, len(want), err)
	}
	name := s.f.Name()
	s.remove()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("spill file still there after remove: %v", err)
	}
}
