package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// The sink produces rows as they come and cannot take them back: a
// ROLLBACK TO SAVEPOINT (or a group that ends in ROLLBACK) stops it with a
// fix, SAVEPOINT and RELEASE change nothing, and an unknown item kind is
// refused, never passed over.
func TestSavepointItems(t *testing.T) {
	s := &Sink{cfg: DefaultConfig("t")}
	ctx := context.Background()
	for _, sp := range []sluice.Savepoint{{Op: sluice.SavepointSet, Name: "a"}, {Op: sluice.SavepointRelease, Name: "a"}} {
		if err := s.write(ctx, &sluice.StreamItem{Kind: sluice.ItemSavepoint, GTID: "0-1-5", Savepoint: sp}); err != nil {
			t.Errorf("%s: %v", sp.SQL(), err)
		}
	}
	for _, sp := range []sluice.Savepoint{{Op: sluice.SavepointRollback, Name: "a"}} {
		err := s.write(ctx, &sluice.StreamItem{Kind: sluice.ItemSavepoint, GTID: "0-1-5", Savepoint: sp})
		if !errors.Is(err, sluice.ErrUnsupportedEvent) || !strings.Contains(err.Error(), "sluice skip --config TASK --gtid 0-1-5") || !strings.Contains(err.Error(), sp.SQL()) {
			t.Errorf("%s: %v", sp.SQL(), err)
		}
	}
	if err := s.write(ctx, &sluice.StreamItem{Kind: 99}); err == nil {
		t.Error("an unknown item kind was passed over")
	}
}
