package sandboxtest

import (
	"errors"
	"testing"
)

// Under -short (make test-unit) every helper that would start a server or
// build sluice skips its test, and New and its kin refuse: a test run
// with -short must start nothing.
func TestHelpersSkipUnderShort(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks what -short does; without it the helpers start servers")
	}
	for name, start := range map[string]func(t *testing.T){
		"Start":       func(t *testing.T) { Start(t, "short") },
		"MustOpen":    func(t *testing.T) { MustOpen(t, nil, "") },
		"StartEtcd":   func(t *testing.T) { StartEtcd(t) },
		"StartKafka":  func(t *testing.T) { StartKafka(t) },
		"StartRedis":  func(t *testing.T) { StartRedis(t) },
		"BuildSluice": func(t *testing.T) { BuildSluice(t) },
	} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			start(t)
			t.Errorf("%s returned under -short", name)
		})
		if !skipped {
			t.Errorf("%s did not skip under -short", name)
		}
	}
	if _, _, err := New("short"); !errors.Is(err, ErrShort) {
		t.Errorf("New under -short: %v, want ErrShort", err)
	}
	if _, _, err := NewEtcd(); !errors.Is(err, ErrShort) {
		t.Errorf("NewEtcd under -short: %v, want ErrShort", err)
	}
	if _, _, err := NewRedis(); !errors.Is(err, ErrShort) {
		t.Errorf("NewRedis under -short: %v, want ErrShort", err)
	}
	if _, _, err := NewKafka(); !errors.Is(err, ErrShort) {
		t.Errorf("NewKafka under -short: %v, want ErrShort", err)
	}
	if _, err := SluiceBinary(t.TempDir()); !errors.Is(err, ErrShort) {
		t.Errorf("SluiceBinary under -short: %v, want ErrShort", err)
	}
}
