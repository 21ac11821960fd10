package oltp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// CreateTableSQL is oltp_common.lua's create_table for MySQL with the
// defaults (auto_inc on, primary key on id, InnoDB).
func CreateTableSQL(n int) string {
	return fmt.Sprintf(`CREATE TABLE sbtest%d(
  id INTEGER NOT NULL AUTO_INCREMENT,
  k INTEGER DEFAULT '0' NOT NULL,
  c CHAR(120) DEFAULT '' NOT NULL,
  pad CHAR(60) DEFAULT '' NOT NULL,
  PRIMARY KEY (id)
) /*! ENGINE = innodb */ `, n)
}

// prepareBatch is how many rows one multi-row INSERT carries (about 200 KB).
const prepareBatch = 1000

// Prepare creates the database if needed and tables sbtest1..N, fills each
// with TableSize rows exactly as sysbench does (k drawn with the default
// distribution from [1, table size], c and pad from the templates, ids by
// AUTO_INCREMENT) and then creates index k_N on k. Tables are filled by up
// to threads connections at once. A table that already exists is an error,
// as in sysbench.
func Prepare(ctx context.Context, c Conn, m Mix, d Dist, threads int, seed uint64, log io.Writer) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = io.Discard
	}
	admin, err := c.open(ctx, "", 2)
	if err != nil {
		return err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+sluice.QuoteIdent(c.DB)); err != nil {
		admin.Close()
		return fmt.Errorf("create database %s: %w", c.DB, c.classify(err))
	}
	admin.Close()
	db, err := c.open(ctx, c.DB, threads)
	if err != nil {
		return err
	}
	defer db.Close()
	threads = max(1, min(threads, m.Tables))
	jobs := make(chan int)
	errc := make(chan error, threads)
	var wg sync.WaitGroup
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		fmt.Fprintf(log, format+"\n", args...)
		logMu.Unlock()
	}
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := NewRand(d, seed+uint64(w)*0x9e3779b97f4a7c15)
			for n := range jobs {
				if err := prepareTable(ctx, db, c, m, r, n, logf); err != nil {
					errc <- err
					return
				}
			}
		}(w)
	}
	var firstErr error
	go func() { wg.Wait(); close(errc) }()
feed:
	for n := 1; n <= m.Tables; n++ {
		select {
		case jobs <- n:
		case err := <-errc:
			firstErr = err
			break feed
		case <-ctx.Done():
			firstErr = ctx.Err()
			break feed
		}
	}
	close(jobs)
	for err := range errc {
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func prepareTable(ctx context.Context, db *sql.DB, c Conn, m Mix, r *Rand, n int, logf func(string, ...any)) error {
	logf("Creating table 'sbtest%d'...", n)
	if _, err := db.ExecContext(ctx, CreateTableSQL(n)); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1050 {
			return &sluice.Error{Op: fmt.Sprintf("prepare %s.sbtest%d", c.DB, n), Err: fmt.Errorf("%w: table already exists", sluice.ErrConfig),
				Hint: "run `sluice bench oltp cleanup` with the same --db and --tables first"}
		}
		return fmt.Errorf("create sbtest%d: %w", n, c.classify(err))
	}
	if m.TableSize > 0 {
		logf("Inserting %d records into 'sbtest%d'", m.TableSize, n)
	}
	var b strings.Builder
	size := uint32(max(m.TableSize, 1))
	for i := 0; i < m.TableSize; {
		b.Reset()
		fmt.Fprintf(&b, "INSERT INTO sbtest%d(k, c, pad) VALUES", n)
		for j := 0; j < prepareBatch && i < m.TableSize; j, i = j+1, i+1 {
			if j > 0 {
				b.WriteByte(',')
			}
			c, pad := r.String(cTemplate), r.String(padTemplate)
			fmt.Fprintf(&b, "(%d, '%s', '%s')", r.Default(1, size), c, pad)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			return fmt.Errorf("fill sbtest%d: %w", n, c.classify(err))
		}
	}
	logf("Creating a secondary index on 'sbtest%d'...", n)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE INDEX k_%d ON sbtest%d(k)", n, n)); err != nil {
		return fmt.Errorf("index sbtest%d: %w", n, c.classify(err))
	}
	return nil
}

// Cleanup drops tables sbtest1..N (those that exist).
func Cleanup(ctx context.Context, c Conn, tables int, log io.Writer) error {
	if tables < 1 {
		return fmt.Errorf("invalid --tables %d: use 1 or more", tables)
	}
	if log == nil {
		log = io.Discard
	}
	db, err := c.open(ctx, c.DB, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	for n := 1; n <= tables; n++ {
		fmt.Fprintf(log, "Dropping table 'sbtest%d'...\n", n)
		if _, err := db.ExecContext(ctx, fmt.Sprintf("DROP TABLE IF EXISTS sbtest%d", n)); err != nil {
			return fmt.Errorf("drop sbtest%d: %w", n, c.classify(err))
		}
	}
	return nil
}

// CheckTables verifies that sbtest1..N exist in the database, so that `run`
// fails up front with a clear message rather than mid-measurement.
func CheckTables(ctx context.Context, db *sql.DB, c Conn, tables int) error {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME LIKE 'sbtest%'", c.DB)
	if err != nil {
		return c.classify(err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[strings.ToLower(name)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c.classify(err)
	}
	var missing []string
	for n := 1; n <= tables; n++ {
		if !have[fmt.Sprintf("sbtest%d", n)] {
			missing = append(missing, fmt.Sprintf("sbtest%d", n))
		}
	}
	if len(missing) > 0 {
		list := strings.Join(missing, ", ")
		if len(missing) > 5 {
			list = strings.Join(missing[:5], ", ") + fmt.Sprintf(" and %d more", len(missing)-5)
		}
		return &sluice.Error{Op: "bench run on " + c.Addr() + " database " + c.DB,
			Err:  fmt.Errorf("%w: %s missing", sluice.ErrUnknownTable, list),
			Hint: "run `sluice bench oltp prepare` with the same --db, --tables and --table-size first"}
	}
	return nil
}
