package sqlgen

import (
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
)

// CreateDatabase builds CREATE DATABASE IF NOT EXISTS.
func CreateDatabase(schema string) string {
	return "CREATE DATABASE IF NOT EXISTS " + sluice.QuoteIdent(schema)
}

// CreateTableAs rewrites a SHOW CREATE TABLE statement so it creates the
// table under the name target (schema-qualified), keeping everything after
// the name exactly as the source printed it.
func CreateTableAs(create string, target sluice.TableRef) (string, error) {
	rest, ok := strings.CutPrefix(create, "CREATE TABLE ")
	if !ok {
		return "", fmt.Errorf("not a CREATE TABLE statement: %.40q", create)
	}
	n, err := identLen(rest)
	if err != nil {
		return "", err
	}
	rest = rest[n:]
	// SHOW CREATE TABLE never qualifies the name, but a hand-written
	// schema file might: skip a second, dotted part.
	if strings.HasPrefix(rest, ".") {
		m, err := identLen(rest[1:])
		if err != nil {
			return "", err
		}
		rest = rest[1+m:]
	}
	return "CREATE TABLE " + target.Quoted() + rest, nil
}

// identLen is the length of the (backtick-quoted or bare) identifier at the
// start of s.
func identLen(s string) (int, error) {
	if strings.HasPrefix(s, "`") {
		for i := 1; i < len(s); i++ {
			if s[i] != '`' {
				continue
			}
			if i+1 < len(s) && s[i+1] == '`' {
				i++
				continue
			}
			return i + 1, nil
		}
		return 0, fmt.Errorf("unterminated identifier in %.40q", s)
	}
	i := strings.IndexAny(s, " .(")
	if i <= 0 {
		return 0, fmt.Errorf("no table name in %.40q", s)
	}
	return i, nil
}

// CheckpointDDL creates the schema and tables where load keeps its state in
// the target: the chunk plan per task and table (so a resumed run cuts the
// same chunks) with the snapshot position of the run that made it (and the
// target table), one row per loaded chunk (committed in the same
// transaction as the chunk's rows, with the snapshot position the chunk was
// read at), the task's first snapshot position, and the tables being
// emptied for a reload (load_reset).
func CheckpointDDL(schema string) []string {
	q := sluice.QuoteIdent(schema)
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + q,
		"CREATE TABLE IF NOT EXISTS " + q + ".load_task (task VARCHAR(255) NOT NULL PRIMARY KEY, position LONGTEXT NOT NULL, started TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), finished TIMESTAMP(6) NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + q + ".load_plan (task VARCHAR(255) NOT NULL, tbl VARCHAR(400) NOT NULL, source_tbl VARCHAR(400) NOT NULL, plan LONGTEXT NOT NULL, snapshot LONGTEXT NULL, made TINYINT NOT NULL DEFAULT 0, created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY (task, tbl)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + q + ".load_checkpoint (task VARCHAR(255) NOT NULL, tbl VARCHAR(400) NOT NULL, chunk INT NOT NULL, `rows` BIGINT NOT NULL, bytes BIGINT NOT NULL, snapshot LONGTEXT NULL, done_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), PRIMARY KEY (task, tbl, chunk)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + q + ".load_reset (task VARCHAR(255) NOT NULL, tbl VARCHAR(400) NOT NULL, PRIMARY KEY (task, tbl)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
	}
}
