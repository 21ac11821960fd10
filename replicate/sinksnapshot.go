package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sink/kafka"
)

// snapshotInto writes the initial snapshot of the selected tables into sk
// (one Kafka transaction, sink/kafka/snapshot.go) and returns its
// position. The rows are read in a consistent snapshot whose binlog
// position MariaDB reports (binlog_snapshot_file/position), so the changes
// replicated from that position follow the snapshot with no gap and no
// overlap, without locking the source.
func (s *SinkTask) snapshotInto(ctx context.Context, sk *kafka.Sink, flavor string) (sluice.Position, error) {
	cfg := s.t.cfg
	var pos sluice.Position
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 2})
	if err != nil {
		return pos, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION time_zone = '+00:00'", "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return pos, dbconn.Classify(err, "source", cfg.Source)
		}
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck
	status := func(name string) (string, error) {
		var n, v string
		err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&n, &v)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		return v, err
	}
	file, err := status("binlog_snapshot_file")
	if err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	off, err := status("binlog_snapshot_position")
	if err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	if file == "" || flavor != "mariadb" {
		return pos, &sluice.Error{Op: "snapshot for the Kafka sink", Err: fmt.Errorf("%w: the source reports no binlog_snapshot_file (MariaDB only)", sluice.ErrConfig),
			Hint: "use --mode incremental with a start position, or a MariaDB source"}
	}
	p, _ := strconv.ParseUint(off, 10, 32)
	pos = sluice.Position{File: file, Pos: uint32(p), Flavor: flavor}
	if err := conn.QueryRowContext(ctx, "SELECT IFNULL(BINLOG_GTID_POS(?, ?), '')", pos.File, pos.Pos).Scan(&pos.GTIDSet); err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	refs, err := schema.ListTables(ctx, db, cfg.Decode.Selected)
	if err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	tracker := schema.NewTracker()
	if err := sk.BeginSnapshot(pos); err != nil {
		return pos, err
	}
	var rows int64
	for _, ref := range refs {
		tb, err := schema.Inspect(ctx, db, ref)
		if errors.Is(err, sluice.ErrUnknownTable) {
			continue
		}
		if err != nil {
			return pos, dbconn.Classify(err, "source", cfg.Source)
		}
		tb.Ref = ref
		tracker.Put(tb)
		out := *tb
		if cfg.Decode.Route != nil {
			out.Ref = cfg.Decode.Route(ref)
		}
		n, err := snapshotTable(ctx, conn, sk, &out, ref)
		if err != nil {
			return pos, err
		}
		rows += n
	}
	state, err := tracker.Snapshot()
	if err != nil {
		return pos, err
	}
	if err := sk.CommitSnapshot(ctx, pos, state); err != nil {
		return pos, err
	}
	s.t.logf("snapshot of %d tables, %d rows committed to Kafka at %s", len(refs), rows, pos)
	return pos, nil
}

func snapshotTable(ctx context.Context, conn *sql.Conn, sk *kafka.Sink, tb *sluice.Table, ref sluice.TableRef) (int64, error) {
	res, err := conn.QueryContext(ctx, "SELECT * FROM "+ref.Quoted())
	if err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", ref, err)
	}
	defer res.Close()
	cols, err := res.Columns()
	if err != nil {
		return 0, err
	}
	if len(cols) != len(tb.Columns) {
		return 0, fmt.Errorf("snapshot %s: %d columns read, %d inspected (the table changed meanwhile); run again", ref, len(cols), len(tb.Columns))
	}
	raw := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range raw {
		dest[i] = &raw[i]
	}
	var n int64
	for res.Next() {
		if err := res.Scan(dest...); err != nil {
			return n, fmt.Errorf("snapshot %s: %w", ref, err)
		}
		row := make([]any, len(raw))
		for i, b := range raw {
			row[i] = snapshotValue(tb.Columns[i], b)
		}
		if err := sk.SnapshotRow(ctx, tb, row); err != nil {
			return n, err
		}
		n++
	}
	if err := res.Err(); err != nil {
		return n, fmt.Errorf("snapshot %s: %w", ref, err)
	}
	return n, nil
}

// snapshotValue turns a column's text-protocol bytes into the Go value the
// binlog decoder gives for it, so both reach the encoder alike.
func snapshotValue(c sluice.Column, b sql.RawBytes) any {
	if b == nil {
		return nil
	}
	s := string(b)
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year":
		if c.Unsigned {
			if v, err := strconv.ParseUint(s, 10, 64); err == nil {
				return v
			}
		} else if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v
		}
	case "float":
		if v, err := strconv.ParseFloat(s, 32); err == nil {
			return float32(v)
		}
	case "double", "real":
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v
		}
	case "bit":
		var v int64
		for _, x := range b {
			v = v<<8 | int64(x)
		}
		return v
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point", "linestring", "polygon",
		"multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return append([]byte(nil), b...)
	}
	return s
}
