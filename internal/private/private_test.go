package private

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTightenOldTaskDir: a task directory and relay files that an older
// version made 0755/0644 lose the group's and others' access; a mode
// already private is kept.
func TestTightenOldTaskDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "mysql-bin.000001")
	if err := os.WriteFile(old, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.WriteFile(ro, []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(dir, "relay")); err != nil {
		t.Fatal(err)
	}
	if err := Tighten(dir); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "relay"): 0o700, old: 0o600, ro: 0o400} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
}
