package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/schema"
)

// TestSkipCommentsReturnsTheSameEvents: a reader that skips comment events
// (the replication task's) returns every event an ordinary reader returns,
// with the same types, timestamps, positions, GTID sets and bytes, except
// that Annotate_rows and Binlog_checkpoint events come unparsed; and a decoder fed by either
// produces the same items. The relay holds an Annotate_rows event larger
// than the reader's buffer, which is skipped across refills, and one across
// a rotation.
func TestSkipCommentsReturnsTheSameEvents(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	writeSome(t, db)
	// A statement of 2 MB: its Annotate_rows event is over the 1 MiB buffer.
	sandboxtest.MustExec(t, db, "INSERT INTO d.t (id, v, b) VALUES (2000, 'long', '"+strings.Repeat("q", 2<<20)+"')",
		"UPDATE d.t SET v = 'again', w = 5 WHERE id BETWEEN 11 AND 15", "DELETE FROM d.t WHERE id = 12")
	end := masterStatus(t, db)

	l := openLog(t, t.TempDir(), relay.SyncInterval)
	defer l.Close()
	p := startPump(t, inst, l, sluice.Position{File: start.File, Pos: 4, GTIDSet: start.GTIDSet})
	waitEnd(t, l, p, end)
	p.stop(t)

	from := sluice.Position{File: start.File, Pos: 4, GTIDSet: start.GTIDSet}
	plain, err := l.NewReader(from, decode.NewParser("mariadb"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	skip, err := l.NewReader(from, decode.NewParser("mariadb"))
	if err != nil {
		t.Fatal(err)
	}
	defer skip.Close()
	skip.SkipComments()
	decoder := func() *decode.Decoder {
		cfg := decode.DefaultConfig()
		cfg.GTIDPos = start.GTIDSet
		d, err := decode.New(cfg, schema.NewTracker())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	dp, ds := decoder(), decoder()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, skipped, big, items := 0, 0, 0, 0
	for plain.Position().Compare(l.End()) < 0 {
		want, wpos, err := plain.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Rendered before the skipping reader's next call (its skipped
		// event is valid until then).
		wantItems := render(t, dp, want, wpos)
		got, gpos, err := skip.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Header.EventType != want.Header.EventType || got.Header.Timestamp != want.Header.Timestamp || gpos != wpos {
			t.Fatalf("event %d: skipping reader gave %s at %d ending at %+v, plain %s at %d ending at %+v",
				n, got.Header.EventType, got.Header.Timestamp, gpos, want.Header.EventType, want.Header.Timestamp, wpos)
		}
		switch want.Header.EventType {
		case replication.MARIADB_ANNOTATE_ROWS_EVENT, replication.MARIADB_BINLOG_CHECKPOINT_EVENT:
			if got.Event != nil || got.RawData != nil {
				t.Fatalf("event %d: a %s event was parsed (%T, %d bytes)", n, want.Header.EventType, got.Event, len(got.RawData))
			}
			if len(want.RawData) > 1<<20 {
				big++ // skipped across the buffer's refills
			}
			skipped++
		default:
			if !bytes.Equal(got.RawData, want.RawData) || fmt.Sprintf("%T", got.Event) != fmt.Sprintf("%T", want.Event) {
				t.Fatalf("event %d (%s): the skipping reader's bytes or event differ", n, want.Header.EventType)
			}
		}
		gotItems := render(t, ds, got, gpos)
		if gotItems != wantItems {
			t.Fatalf("event %d (%s): the decoder made\n%s\nfrom the skipping reader's event, and\n%s\nfrom the plain one's", n, want.Header.EventType, gotItems, wantItems)
		}
		items += strings.Count(wantItems, "\n")
		n++
	}
	if skipped < 10 || big != 1 || items < 20 {
		t.Fatalf("read %d events, %d skipped (%d over 1 MiB), %d decoded items: the relay lacks what the test needs", n, skipped, big, items)
	}
	if skip.Position() != plain.Position() {
		t.Fatalf("the readers end at %+v (skipping) and %+v", skip.Position(), plain.Position())
	}
}

// render feeds ev to d and prints the items it made, rows included.
func render(t *testing.T, d *decode.Decoder, ev *replication.BinlogEvent, pos sluice.Position) string {
	t.Helper()
	items, err := d.Feed(ev, pos)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "%v %s %d %+v %v", it.Kind, it.GTID, it.Timestamp, it.End, it.DDL)
		for _, c := range it.Changes {
			fmt.Fprintf(&b, " [%v %s %#v %#v]", c.Kind, c.Table.Ref, c.Before, c.After)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
