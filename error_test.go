package sluice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestErrorHasOneFix: an Error whose cause carries its own fix prints one
// "(fix: ...)", the cause's; a cause without one gets the outer hint.
func TestErrorHasOneFix(t *testing.T) {
	inner := &Error{Op: "connect to target 127.0.0.1:3306", Err: ErrAccessDenied, Hint: "check target.password"}
	outer := &Error{Op: "load", Err: fmt.Errorf("open pool: %w", inner), Hint: "run the same command again"}
	got := outer.Error()
	if strings.Count(got, "(fix: ") != 1 || !strings.Contains(got, "(fix: check target.password)") || !errors.Is(outer, ErrAccessDenied) {
		t.Fatalf("nested: %q", got)
	}
	plain := &Error{Op: "load", Err: errors.New("boom"), Hint: "run again"}
	if got := plain.Error(); got != "load: boom (fix: run again)" {
		t.Fatalf("plain: %q", got)
	}
}
