package dump

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
)

// Non-transactional tables (Aria, MyISAM, MEMORY, ...) are not held still by
// a consistent-snapshot transaction: a read in it sees their rows as they
// are now, not as they were at the snapshot's position. A row written to
// one after the snapshot would be copied and then replicated again (a
// Duplicate entry stop), a row deleted would be missed and its delete
// replayed on nothing. So, as mydumper does, their rows are read while
// their writers are held off: before the global read lock is released, a
// separate session takes LOCK TABLES ... READ on every one of them (a read
// lock is compatible with the global read lock, so it is granted at once),
// and releases it as soon as their last chunk is read. The global read
// lock itself stays as short as before, and writes to InnoDB tables never
// wait for the copy of the others. Writes to a non-transactional table
// wait until its rows are read (mydumper's --less-locking does the same).

// The dump's sessions read the held tables with SELECT HIGH_PRIORITY. The
// engines of these tables lock whole tables, and a plain read queues behind
// a writer that waits for the hold's read lock: a wait that would last
// until the hold ends, after the reads (it failed the dump with a lock wait
// timeout). A high-priority read goes before waiting writers; no writer
// can hold the table while the hold's read lock is there.

// withHighPriority turns a SELECT into SELECT HIGH_PRIORITY.
func withHighPriority(query string) string {
	if rest, ok := strings.CutPrefix(query, "SELECT "); ok {
		return "SELECT HIGH_PRIORITY " + rest
	}
	return query
}

// highPriority is a chunk.Querier whose reads are SELECT HIGH_PRIORITY (the
// chunk plan of a held table).
type highPriority struct{ c *sql.Conn }

func (h highPriority) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return h.c.QueryContext(ctx, withHighPriority(query), args...)
}

// nontxHold is the session that holds the non-transactional tables' read
// locks while the dump reads them.
type nontxHold struct {
	mu     sync.Mutex
	conn   *sql.Conn
	since  time.Time
	tables []sluice.TableRef
	set    map[sluice.TableRef]bool
	// left counts the chunks of those tables still to be read in Run;
	// running says Run has started.
	left    int
	running bool
	log     *slog.Logger
}

// lock takes LOCK TABLES ... READ on tables in a new session of db. It is
// called under the global read lock, which waited for every running write.
func (h *nontxHold) lock(ctx context.Context, db *sql.DB, tables []sluice.TableRef, wait time.Duration) error {
	if len(tables) == 0 {
		return nil
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].String() < tables[j].String() })
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("LOCK TABLES ")
	for i, t := range tables {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Quoted() + " READ")
	}
	for _, q := range []string{fmt.Sprintf("SET SESSION lock_wait_timeout = %d", max(int(wait.Seconds()), 1)), b.String()} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			c.Close()
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conn, h.since, h.tables, h.set = c, time.Now(), tables, map[sluice.TableRef]bool{}
	for _, t := range tables {
		h.set[t] = true
	}
	return nil
}

// held reports whether table t is one of the held tables.
func (h *nontxHold) held(t sluice.TableRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.set[t]
}

// start sets how many chunks of held tables Run reads; with none, the
// locks go at once.
func (h *nontxHold) start(chunks int) {
	h.mu.Lock()
	h.left, h.running = chunks, true
	h.mu.Unlock()
	if chunks == 0 {
		h.release()
	}
}

// chunkRead counts one chunk of a held table as read, and releases the
// locks after the last one: its rows are the snapshot's from then on,
// whatever the loader still does with them.
func (h *nontxHold) chunkRead() {
	h.mu.Lock()
	h.left--
	last := h.left == 0
	h.mu.Unlock()
	if last {
		h.release()
	}
}

// release ends the locks (once) and says how long the tables' writers
// were held off.
func (h *nontxHold) release() {
	h.mu.Lock()
	c, since, tables, left := h.conn, h.since, h.tables, h.left
	if !h.running {
		left = -1
	}
	h.conn = nil
	h.mu.Unlock()
	if c == nil {
		return
	}
	// A fresh context: the locks must go even when the dump was cancelled.
	_, _ = c.ExecContext(context.Background(), "UNLOCK TABLES")
	c.Close()
	if h.log != nil {
		names := make([]string, 0, min(len(tables), 5))
		for i, t := range tables {
			if i == 5 {
				names = append(names, fmt.Sprintf("and %d more", len(tables)-5))
				break
			}
			names = append(names, t.String())
		}
		held := time.Since(since).Round(time.Millisecond)
		if left < 0 {
			h.log.Info(fmt.Sprintf("the read lock on %d non-transactional table(s) (%s) was released after %s, before they were read (the copy stopped)",
				len(tables), strings.Join(names, ", "), held))
			return
		}
		if left > 0 {
			h.log.Info(fmt.Sprintf("the read lock on %d non-transactional table(s) (%s) was released after %s, with %d of their chunks not read (the copy stopped)",
				len(tables), strings.Join(names, ", "), held, left))
			return
		}
		h.log.Info(fmt.Sprintf("%d non-transactional table(s) (%s) were read under a read lock held for %s: writes to them waited for it (a consistent-snapshot transaction does not hold their rows still)",
			len(tables), strings.Join(names, ", "), held))
	}
}
