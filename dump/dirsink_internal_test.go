package dump

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dump directory that holds other files is refused, and left as it was
// (its mode too): the dump wrote among them and chmodded the directory to
// 0700 (issue 30). An empty directory, a new one, and one with only an
// unfinished dump's files are taken.
func TestDirSinkRefusesForeignFiles(t *testing.T) {
	base := t.TempDir()
	busy := filepath.Join(base, "home")
	if err := os.MkdirAll(busy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirSink(busy); err == nil || !strings.Contains(err.Error(), "notes.txt") || !strings.Contains(err.Error(), "fix: choose a new or empty --dir") {
		t.Fatalf("a directory with notes.txt: %v", err)
	}
	if st, _ := os.Stat(busy); st.Mode().Perm() != 0o755 {
		t.Fatalf("the refused directory's mode became %v", st.Mode().Perm())
	}
	unfinished := filepath.Join(base, "unfinished")
	if err := os.MkdirAll(unfinished, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"db-schema-create.sql", "db.t-schema.sql", "db.t.00001.tsv", ".db.t.00002.tsv.tmp123"} {
		if err := os.WriteFile(filepath.Join(unfinished, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(base, "new"), unfinished} {
		if _, err := NewDirSink(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
