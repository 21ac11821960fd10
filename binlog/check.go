package binlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// Info describes a source as the pre-flight check found it.
type Info struct {
	Version  string
	Flavor   string // "mariadb" or "mysql"
	ServerID uint32
	// Files are the binlog files the source still has, oldest first.
	Files []File
	// GTIDBinlogPos is MariaDB's @@gtid_binlog_pos or MySQL's
	// @@gtid_executed; empty when the source has no GTIDs.
	GTIDBinlogPos string
	// TLS: the source accepts TLS connections (have_ssl = YES).
	TLS bool
}

// File is one entry of SHOW BINARY LOGS.
type File struct {
	Name string
	Size uint64
}

// Check connects to the source with SQL and refuses settings sluice cannot
// replicate from: binary log off, binlog_format other than ROW,
// binlog_row_image other than FULL, or a user without REPLICATION SLAVE.
// Errors are *sluice.Error wrapping ErrBinlogFormat or ErrPrivilege.
func Check(ctx context.Context, cfg Config) (*Info, error) {
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return CheckDB(ctx, db, cfg)
}

// CheckDB is Check on an open connection pool.
func CheckDB(ctx context.Context, db *sql.DB, cfg Config) (*Info, error) {
	op := "check source " + cfg.Source.Addr()
	var (
		info                  Info
		logBin, format, image string
		serverID              uint32
	)
	err := db.QueryRowContext(ctx, "SELECT VERSION(), @@global.log_bin, @@global.binlog_format, @@global.binlog_row_image, @@global.server_id").
		Scan(&info.Version, &logBin, &format, &image, &serverID)
	if err != nil {
		return nil, dbconn.Classify(err, "source", cfg.Source)
	}
	info.ServerID = serverID
	var haveSSL sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@global.have_ssl").Scan(&haveSSL); err == nil {
		info.TLS = strings.EqualFold(haveSSL.String, "YES")
	}
	info.Flavor = cfg.Flavor
	if info.Flavor == "" {
		info.Flavor = DetectFlavor(info.Version)
	}
	if logBin != "1" && !strings.EqualFold(logBin, "ON") {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: binary logging is off", sluice.ErrBinlogFormat),
			Hint: "start the source with log_bin=ON, binlog_format=ROW and binlog_row_image=FULL"}
	}
	if !strings.EqualFold(format, "ROW") {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: binlog_format is %s, sluice needs ROW", sluice.ErrBinlogFormat, format),
			Hint: "run SET GLOBAL binlog_format=ROW on the source and set binlog_format=ROW in its config (existing sessions keep the old format until they reconnect)"}
	}
	if !strings.EqualFold(image, "FULL") {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: binlog_row_image is %s, sluice needs FULL", sluice.ErrBinlogFormat, image),
			Hint: "run SET GLOBAL binlog_row_image=FULL on the source and set binlog_row_image=FULL in its config"}
	}
	if serverID == cfg.ServerID {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: the source's server_id is %d, the same as sluice's", sluice.ErrConfig, serverID),
			Hint: "set incremental.server-id to a value no server uses"}
	}
	if err := checkGrants(ctx, db, cfg); err != nil {
		return nil, err
	}
	files, err := BinaryLogs(ctx, db, cfg)
	if err != nil {
		return nil, err
	}
	info.Files = files
	q := "SELECT @@global.gtid_binlog_pos"
	if info.Flavor == "mysql" {
		q = "SELECT @@global.gtid_executed"
	}
	var gtid sql.NullString
	if err := db.QueryRowContext(ctx, q).Scan(&gtid); err == nil {
		info.GTIDBinlogPos = strings.ReplaceAll(gtid.String, "\n", "")
	}
	return &info, nil
}

// DetectFlavor maps a VERSION() string to "mariadb" or "mysql".
func DetectFlavor(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "mariadb"
	}
	return "mysql"
}

// checkGrants looks for REPLICATION SLAVE (REPLICATION REPLICA in newer
// MariaDB, or ALL PRIVILEGES) on *.* among the current user's grants.
func checkGrants(ctx context.Context, db *sql.DB, cfg Config) error {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return dbconn.Classify(err, "source", cfg.Source)
	}
	defer rows.Close()
	ok := false
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return err
		}
		u := strings.ToUpper(g)
		if !strings.Contains(u, " ON *.* ") {
			continue
		}
		if strings.Contains(u, "ALL PRIVILEGES") || strings.Contains(u, "REPLICATION SLAVE") || strings.Contains(u, "REPLICATION REPLICA") {
			ok = true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !ok {
		return &sluice.Error{Op: "check source " + cfg.Source.Addr(),
			Err:  fmt.Errorf("%w: user %s lacks REPLICATION SLAVE", sluice.ErrPrivilege, cfg.Source.User),
			Hint: fmt.Sprintf("on the source run: GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'<host>'", cfg.Source.User)}
	}
	return nil
}

// BinaryLogs lists the source's binlog files (SHOW BINARY LOGS).
func BinaryLogs(ctx context.Context, db *sql.DB, cfg Config) ([]File, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1227 || me.Number == 1045) {
			return nil, &sluice.Error{Op: "list binlogs on source " + cfg.Source.Addr(), Err: fmt.Errorf("%w: %s", sluice.ErrPrivilege, me.Message),
				Hint: fmt.Sprintf("on the source run: GRANT REPLICATION CLIENT ON *.* TO '%s'@'<host>' (BINLOG MONITOR on MariaDB 10.5+)", cfg.Source.User)}
		}
		return nil, dbconn.Classify(err, "source", cfg.Source)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var files []File
	for rows.Next() {
		var f File
		dest := []any{&f.Name, &f.Size}
		for len(dest) < len(cols) {
			dest = append(dest, new(sql.RawBytes))
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, rows.Err()
}

// CheckPosition refuses a file/position the source no longer has (or never
// had) with an error wrapping ErrBinlogPurged.
func CheckPosition(info *Info, pos sluice.Position, src sluice.Endpoint) error {
	if pos.File == "" {
		return nil
	}
	for _, f := range info.Files {
		if f.Name == pos.File {
			if uint64(pos.Pos) > f.Size {
				return &sluice.Error{Op: "check start position on source " + src.Addr(),
					Err:  fmt.Errorf("%w: %s is %d bytes, position %d is past its end", sluice.ErrBinlogPurged, f.Name, f.Size, pos.Pos),
					Hint: "give a position inside the file, or run the full migration again with --mode all"}
			}
			return nil
		}
	}
	oldest := "none"
	if len(info.Files) > 0 {
		oldest = info.Files[0].Name
	}
	return &sluice.Error{Op: "check start position on source " + src.Addr(),
		Err:  fmt.Errorf("%w: %s is not among the source's binlogs (oldest is %s)", sluice.ErrBinlogPurged, pos.File, oldest),
		Hint: "the source purged the binlog sluice needs; run the full migration again with --mode all, and raise the source's binlog retention (expire_logs_days / binlog_expire_logs_seconds)"}
}
