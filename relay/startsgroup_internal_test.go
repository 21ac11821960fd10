package relay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"
)

// TestStartsGroupInGroupEvents: an offset in a file past 4 GiB is taken as
// the start position only where an event may begin a transaction. An XA
// PREPARE event ends a prepared XA group as XID ends a committed one, so
// an offset at it is inside a group, never a start; before the fix it was
// taken as one (and so could make a second candidate offset, or the
// wrong one). MariaDB's compressed row events are inside a group too.
func TestStartsGroupInGroupEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev")
	for _, c := range []struct {
		typ  replication.EventType
		want bool
	}{
		{replication.XA_PREPARE_LOG_EVENT, false},
		{replication.XID_EVENT, false},
		{replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1, false},
		{replication.MARIADB_UPDATE_ROWS_COMPRESSED_EVENT_V1, false},
		{replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1, false},
		{replication.WRITE_ROWS_EVENTv1, false},
		{replication.MARIADB_GTID_EVENT, true},
		{replication.QUERY_EVENT, true},
		{replication.ROTATE_EVENT, true},
	} {
		hdr := make([]byte, headerSize)
		hdr[4] = byte(c.typ)
		if err := os.WriteFile(path, hdr, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r := &Reader{f: f, limit: headerSize + 100}
		if got := r.startsGroup(0); got != c.want {
			t.Errorf("startsGroup at a %s event = %v, want %v", c.typ, got, c.want)
		}
		f.Close()
	}
}
