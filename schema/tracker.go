package schema

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions in DDL (defaults, checks)

	"github.com/sluice-db/sluice"
)

// Tracker follows the source's table definitions through the DDL in the
// binlog, so that row events are decoded with the schema that was current
// when they were written, never with the source's schema of today. Every
// change makes a new *sluice.Table, so a table pointer is a schema version:
// callers may cache per pointer.
//
// A Tracker is safe for concurrent use; in practice one decoder drives it.
type Tracker struct {
	mu      sync.Mutex
	p       *parser.Parser
	tables  map[string]*tableDef // by lower-case "schema.table"
	version uint64
	// orReplace is the statement the last Parse read from CREATE OR
	// REPLACE TABLE, if any.
	orReplace ast.StmtNode
	// online holds, by ghost table ("schema._t_gho"), the ALTER statements
	// an online schema change tool (gh-ost, pt-online-schema-change) ran
	// on it, to be applied to the real table at the cut-over. Saved with
	// the rest, so that a restart in between loses none.
	online map[string][]string
}

// tableDef is the tracked form of a table: keys by column name, so that
// adding or dropping columns cannot leave a key pointing at the wrong index.
type tableDef struct {
	Ref     sluice.TableRef `json:"ref"`
	Columns []sluice.Column `json:"columns"`
	Keys    []keyDef        `json:"keys"`

	table *sluice.Table // built on demand, replaced on change
}

type keyDef struct {
	Name    string   `json:"name"`
	Primary bool     `json:"primary,omitempty"`
	Cols    []string `json:"cols"`
	// Other marks an index that cannot identify rows (not unique, or over
	// a column prefix). It is kept for its name: the server names an
	// unnamed index after its first column, avoiding every index name
	// taken, and a later DROP INDEX must find the index the server drops.
	Other bool `json:"other,omitempty"`
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{p: parser.New(), tables: map[string]*tableDef{}}
}

func keyOf(ref sluice.TableRef) string {
	return strings.ToLower(ref.Schema) + "." + strings.ToLower(ref.Name)
}

// Version counts the schema changes the tracker has applied.
func (t *Tracker) Version() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// Table returns the current definition of ref, or nil if it is not tracked.
func (t *Tracker) Table(ref sluice.TableRef) *sluice.Table {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.tables[keyOf(ref)]
	if d == nil {
		return nil
	}
	return d.build()
}

// Put records (or replaces) a table definition, e.g. from Inspect.
func (t *Tracker) Put(tb *sluice.Table) {
	d := &tableDef{Ref: tb.Ref, Columns: append([]sluice.Column(nil), tb.Columns...)}
	for n, k := range tb.UniqueKeys {
		// The names matter: a later DROP PRIMARY KEY or DROP INDEX finds
		// the key by its name, and a key left behind would keep
		// identifying rows by columns that are no longer unique.
		kd := keyDef{Name: fmt.Sprintf("uk%d", n), Primary: tb.PKIsPrimary && equalInts(k, tb.PK)}
		if n < len(tb.UniqueKeyNames) && tb.UniqueKeyNames[n] != "" {
			kd.Name = tb.UniqueKeyNames[n]
		}
		if kd.Primary {
			kd.Name = "PRIMARY"
		}
		for _, ci := range k {
			kd.Cols = append(kd.Cols, tb.Columns[ci].Name)
		}
		d.Keys = append(d.Keys, kd)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tables[keyOf(tb.Ref)] = d
	t.version++
}

// Seed reads the current definitions of refs from db (the source at the
// replication start position, or the target right after the full copy).
func (t *Tracker) Seed(ctx context.Context, db *sql.DB, refs []sluice.TableRef) error {
	for _, r := range refs {
		tb, err := Inspect(ctx, db, r)
		if err != nil {
			return fmt.Errorf("seed schema tracker: %w", err)
		}
		t.Put(tb)
	}
	return nil
}

// Tables lists the tracked tables, sorted.
func (t *Tracker) Tables() []sluice.TableRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]sluice.TableRef, 0, len(t.tables))
	for _, d := range t.tables {
		out = append(out, d.Ref)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

type snapshot struct {
	Version uint64              `json:"version"`
	Tables  []*tableDef         `json:"tables"`
	Online  map[string][]string `json:"online,omitempty"`
}

// Snapshot serialises the tracker, to be stored with the checkpoint.
func (t *Tracker) Snapshot() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := snapshot{Version: t.version, Online: t.online}
	for _, d := range t.tables {
		s.Tables = append(s.Tables, d)
	}
	sort.Slice(s.Tables, func(i, j int) bool { return keyOf(s.Tables[i].Ref) < keyOf(s.Tables[j].Ref) })
	return json.Marshal(s)
}

// Restore replaces the tracker's state with a Snapshot.
func (t *Tracker) Restore(b []byte) error {
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("restore schema tracker: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tables = map[string]*tableDef{}
	for _, d := range s.Tables {
		t.tables[keyOf(d.Ref)] = d
	}
	t.version = s.Version
	t.online = s.Online
	return nil
}

// StartOnline records that ghost (lower-case "schema.table") is the ghost
// table of an online schema change, with no ALTER yet.
func (t *Tracker) StartOnline(ghost string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.online == nil {
		t.online = map[string][]string{}
	}
	t.online[ghost] = []string{}
	t.version++
}

// AddOnline records an ALTER of ghost, in the source's text; false when
// ghost is no ghost table being tracked.
func (t *Tracker) AddOnline(ghost, alter string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.online[ghost]; !ok {
		return false
	}
	t.online[ghost] = append(t.online[ghost], alter)
	t.version++
	return true
}

// TakeOnline returns ghost's ALTERs and forgets them (the cut-over);
// false when ghost is no ghost table being tracked.
func (t *Tracker) TakeOnline(ghost string) ([]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.online[ghost]
	if ok {
		delete(t.online, ghost)
		t.version++
	}
	return a, ok
}

// IsOnline reports whether ghost is a ghost table being tracked.
func (t *Tracker) IsOnline(ghost string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.online[ghost]
	return ok
}

// build returns the table, with PK chosen as Inspect does: the primary
// key, else the narrowest unique key whose columns are all NOT NULL.
func (d *tableDef) build() *sluice.Table {
	if d.table != nil {
		return d.table
	}
	tb := &sluice.Table{Ref: d.Ref, Columns: append([]sluice.Column(nil), d.Columns...)}
	keys := append([]keyDef(nil), d.Keys...)
	sort.SliceStable(keys, func(a, b int) bool {
		if keys[a].Primary != keys[b].Primary {
			return keys[a].Primary
		}
		return len(keys[a].Cols) < len(keys[b].Cols)
	})
	for _, k := range keys {
		if k.Other {
			continue
		}
		var idx []int
		nullable := false
		for _, c := range k.Cols {
			i := tb.ColumnIndex(c)
			if i < 0 {
				idx = nil
				break
			}
			idx = append(idx, i)
			nullable = nullable || tb.Columns[i].Nullable
		}
		if len(idx) == 0 {
			continue
		}
		tb.UniqueKeys = append(tb.UniqueKeys, idx)
		tb.UniqueKeyNames = append(tb.UniqueKeyNames, k.Name)
		if len(tb.PK) == 0 && !nullable {
			tb.PK, tb.PKIsPrimary = idx, k.Primary
		}
	}
	d.table = tb
	return tb
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Parse parses one or more SQL statements with the TiDB parser in MySQL
// mode. The returned nodes may be passed to Apply and rewritten by callers.
// MariaDB's UUID, INET6 and INET4 column types are parsed as stand-ins
// (see tracker_types.go): SQL restored from the nodes must go through
// RestoreTypes before it is run.
func (t *Tracker) Parse(sqlText string) ([]ast.StmtNode, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sqlText = stripExecComments(sqlText)
	sqlText, orReplace := stripOrReplace(sqlText)
	stmts, _, err := t.p.Parse(sqlText, "", "")
	if err != nil {
		// MariaDB syntax the parser lacks (tracker_types.go, tracker_fix.go).
		fixed := sqlText
		if rewritten, ok := rewriteMariaDBTypes(fixed); ok {
			fixed = rewritten
		}
		for i := 0; i <= maxFixes; i++ {
			s2, _, err2 := t.p.Parse(fixed, "", "")
			if err2 == nil {
				stmts, err = s2, nil
				break
			}
			var ok bool
			if fixed, ok = fixAtError(fixed, err2); !ok {
				break
			}
		}
	}
	if err == nil && orReplace && len(stmts) == 1 {
		t.orReplace = stmts[0]
	}
	return stmts, err
}

// ForgetOrReplace clears what OrReplace reports, once the caller has
// handled it.
func (t *Tracker) ForgetOrReplace() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.orReplace = nil
}

// OrReplace reports whether st was parsed from CREATE OR REPLACE TABLE
// (parsed as CREATE TABLE): the table is dropped first if it exists.
func (t *Tracker) OrReplace(st ast.StmtNode) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return st != nil && t.orReplace == st
}

// SetSQLMode sets the sql_mode bits that change how the parser reads a
// statement's text (ANSI_QUOTES, NO_BACKSLASH_ESCAPES), to those of the
// session the source ran the statement in.
func (t *Tracker) SetSQLMode(ansiQuotes, noBackslashEscapes bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var m mysql.SQLMode
	if ansiQuotes {
		m |= mysql.ModeANSIQuotes
	}
	if noBackslashEscapes {
		m |= mysql.ModeNoBackslashEscapes
	}
	t.p.SetSQLMode(m)
}
