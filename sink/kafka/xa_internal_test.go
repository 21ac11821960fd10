package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestXARefused: the sink stops at a two-phase XA transaction before it
// produces any of its rows (they may be rolled back), and at a group that
// ends in ROLLBACK, instead of publishing rows the source never committed.
func TestXARefused(t *testing.T) {
	for _, it := range []sluice.StreamItem{
		{Kind: sluice.ItemBegin, GTID: "0-1-5", XID: "X'61',X'',1"},
		{Kind: sluice.ItemXACommit, GTID: "0-1-6", XID: "X'61',X'',1"},
		{Kind: sluice.ItemRollback, GTID: "0-1-7"},
	} {
		s := &Sink{cfg: DefaultConfig("t")}
		err := s.write(context.Background(), &it)
		var se *sluice.Error
		if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || se.Hint == "" || s.inSource {
			t.Errorf("%s: got %v, want a refusal with a hint and no transaction opened", it.Kind, err)
		}
	}
}
