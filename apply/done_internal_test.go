package apply

import (
	"errors"
	"testing"
)

// Done closes when an error stops the applier, and stays open before: the
// task waits on it beside its reader instead of polling Err every 100 ms.
func TestDoneClosesOnFailure(t *testing.T) {
	a, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
		t.Fatal("Done closed before anything stopped the applier")
	default:
	}
	boom := errors.New("boom")
	a.fail(boom)
	a.fail(errors.New("second")) // a second failure must not close twice
	select {
	case <-a.Done():
	default:
		t.Fatal("Done still open after a failure")
	}
	if !errors.Is(a.Err(), boom) {
		t.Fatalf("Err %v, want the first failure", a.Err())
	}
}
