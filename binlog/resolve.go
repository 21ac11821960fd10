package binlog

import (
	"context"
	"fmt"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// ResolveGTID finds the binlog file and offset where the transactions after
// gtidSet begin, by asking the source for a GTID-based dump and watching
// where it starts. The relay then copies that file from its start, so relay
// and source offsets stay identical. A purged GTID set is an error wrapping
// ErrBinlogPurged.
func ResolveGTID(ctx context.Context, cfg Config, gtidSet string) (sluice.Position, error) {
	if err := cfg.Validate(); err != nil {
		return sluice.Position{}, err
	}
	set, err := gomysql.ParseGTIDSet(cfg.Flavor, gtidSet)
	if err != nil {
		return sluice.Position{}, &sluice.Error{Op: "resolve GTID set", Err: fmt.Errorf("%w: %q: %v", sluice.ErrConfig, gtidSet, err),
			Hint: "give incremental.gtid-set in the source's format (MariaDB: domain-server-seq, comma separated)"}
	}
	r := &Reader{cfg: cfg}
	s := r.newSyncer()
	defer s.Close()
	st, err := s.StartSyncGTID(set)
	if err != nil {
		return sluice.Position{}, classify(err, cfg, sluice.Position{GTIDSet: gtidSet})
	}
	// Idle sources only send heartbeats; a few of them without a
	// transaction mean the set is at the end of the current file.
	rctx, cancel := context.WithTimeout(ctx, 10*cfg.Heartbeat+30*time.Second)
	defer cancel()
	file := ""
	for {
		ev, err := st.GetEvent(rctx)
		if err != nil {
			if ctx.Err() != nil {
				return sluice.Position{}, ctx.Err()
			}
			return sluice.Position{}, classify(err, cfg, sluice.Position{GTIDSet: gtidSet})
		}
		h := ev.Header
		art := h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0
		found := func(pos uint32) (sluice.Position, error) {
			return sluice.Position{File: file, Pos: pos, GTIDSet: gtidSet, Flavor: cfg.Flavor}, nil
		}
		switch h.EventType {
		case replication.ROTATE_EVENT:
			if re, ok := ev.Event.(*replication.RotateEvent); ok {
				file = string(re.NextLogName)
			}
		case replication.MARIADB_GTID_LIST_EVENT:
			// MariaDB marks where the requested stream continues with an
			// artificial Gtid_list carrying that offset.
			if art && h.LogPos > 0 && file != "" {
				return found(h.LogPos)
			}
		case replication.MARIADB_GTID_EVENT, replication.GTID_EVENT, replication.ANONYMOUS_GTID_EVENT, replication.GTID_TAGGED_LOG_EVENT:
			if file != "" && h.LogPos >= h.EventSize {
				return found(h.LogPos - h.EventSize)
			}
		case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
			if file != "" && h.LogPos > 0 {
				return found(h.LogPos)
			}
		}
	}
}
