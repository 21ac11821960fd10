// Package oltp is sluice's sysbench-compatible OLTP benchmark: the sbtest
// tables and data of sysbench's oltp_common.lua, its eight workloads with
// the same statement mix, parameters and random distributions, and a runner
// that sweeps thread counts and reports QPS, TPS and HdrHistogram latency
// percentiles through bench/report.
//
// The statement mix follows sysbench 1.0.20's Lua scripts
// (/usr/share/sysbench/oltp_*.lua): an event (one transaction) of
// read_write is BEGIN, 10 point selects, one each of the four range
// selects, one index update, one non-index update, one delete and one insert
// of the same id, COMMIT. Statements run as server-side prepared statements,
// as sysbench does, except oltp_insert's INSERT, which sysbench sends as a
// plain query.
package oltp

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Kind is one statement of oltp_common.lua.
type Kind int

const (
	PointSelect Kind = iota
	SimpleRange
	SumRange
	OrderRange
	DistinctRange
	IndexUpdate
	NonIndexUpdate
	Delete
	Insert     // INSERT with an id (delete_inserts)
	InsertText // oltp_insert's plain (not prepared) INSERT
	Begin
	Commit
	numKinds
)

// Class is how sysbench counts a statement: read, write or other.
type Class int

const (
	Read Class = iota
	Write
	Other
)

// stmtSQL is each statement's text; %d is the table number.
var stmtSQL = [numKinds]string{
	PointSelect:    "SELECT c FROM sbtest%d WHERE id=?",
	SimpleRange:    "SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ?",
	SumRange:       "SELECT SUM(k) FROM sbtest%d WHERE id BETWEEN ? AND ?",
	OrderRange:     "SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c",
	DistinctRange:  "SELECT DISTINCT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c",
	IndexUpdate:    "UPDATE sbtest%d SET k=k+1 WHERE id=?",
	NonIndexUpdate: "UPDATE sbtest%d SET c=? WHERE id=?",
	Delete:         "DELETE FROM sbtest%d WHERE id=?",
	Insert:         "INSERT INTO sbtest%d (id, k, c, pad) VALUES (?, ?, ?, ?)",
	InsertText:     "INSERT INTO sbtest%d (id, k, c, pad) VALUES (%d, %d, '%s', '%s')",
	Begin:          "BEGIN",
	Commit:         "COMMIT",
}

var kindNames = [numKinds]string{"point_select", "simple_range", "sum_range", "order_range", "distinct_range",
	"index_update", "non_index_update", "delete", "insert", "insert_text", "begin", "commit"}

func (k Kind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// SQL is the statement text for table (1-based).
func (k Kind) SQL(table int) string {
	if k == Begin || k == Commit {
		return stmtSQL[k]
	}
	if k == InsertText {
		return strings.Replace(stmtSQL[k], "%d", fmt.Sprint(table), 1)
	}
	return fmt.Sprintf(stmtSQL[k], table)
}

// Class says whether sysbench counts k as a read, a write or other.
func (k Kind) Class() Class {
	switch k {
	case PointSelect, SimpleRange, SumRange, OrderRange, DistinctRange:
		return Read
	case Begin, Commit:
		return Other
	}
	return Write
}

// Prepared reports whether k runs as a server-side prepared statement.
func (k Kind) Prepared() bool { return k != Begin && k != Commit && k != InsertText }

// Executor runs one statement on table (1-based) with args. Reads fetch and
// discard their rows.
type Executor interface {
	Exec(ctx context.Context, k Kind, table int, args ...any) error
}

// Mix holds oltp_common.lua's options that shape an event. Zero values are
// meaningful (0 point selects), so start from DefaultMix.
type Mix struct {
	Tables         int  // --tables: 1
	TableSize      int  // --table-size: 10000
	RangeSize      int  // --range-size: 100
	PointSelects   int  // --point-selects: 10 (oltp_point_select always runs 1)
	SimpleRanges   int  // --simple-ranges: 1
	SumRanges      int  // --sum-ranges: 1
	OrderRanges    int  // --order-ranges: 1
	DistinctRanges int  // --distinct-ranges: 1
	IndexUpdates   int  // --index-updates: 1
	NonIndexUpd    int  // --non-index-updates: 1
	DeleteInserts  int  // --delete-inserts: 1
	RangeSelects   bool // --range-selects: true
	SkipTrx        bool // --skip-trx: false
}

// DefaultMix returns sysbench 1.0.20's defaults.
func DefaultMix() Mix {
	return Mix{Tables: 1, TableSize: 10000, RangeSize: 100, PointSelects: 10, SimpleRanges: 1, SumRanges: 1,
		OrderRanges: 1, DistinctRanges: 1, IndexUpdates: 1, NonIndexUpd: 1, DeleteInserts: 1, RangeSelects: true}
}

// Validate checks the mix.
func (m Mix) Validate() error {
	if m.Tables < 1 {
		return fmt.Errorf("invalid --tables %d: use 1 or more", m.Tables)
	}
	if m.TableSize < 0 || m.TableSize > 1<<31-1 {
		return fmt.Errorf("invalid --table-size %d: use 0 to 2147483647", m.TableSize)
	}
	for name, v := range map[string]int{"range-size": m.RangeSize, "point-selects": m.PointSelects, "simple-ranges": m.SimpleRanges,
		"sum-ranges": m.SumRanges, "order-ranges": m.OrderRanges, "distinct-ranges": m.DistinctRanges,
		"index-updates": m.IndexUpdates, "non-index-updates": m.NonIndexUpd, "delete-inserts": m.DeleteInserts} {
		if v < 0 {
			return fmt.Errorf("invalid --%s %d: use 0 or more", name, v)
		}
	}
	return nil
}

// Workload is one of sysbench's oltp_*.lua scripts.
type Workload struct {
	Name string
	// Kinds are the statements a worker prepares (sysbench's prepare_statements).
	Kinds func(m Mix) []Kind
	// Event runs one event (a transaction, or a single statement).
	Event func(ctx context.Context, m *Mix, r *Rand, x Executor) error
	// ReadOnly workloads never change the tables.
	ReadOnly bool
}

var workloads = map[string]*Workload{}

func register(w *Workload) { workloads[w.Name] = w }

// Lookup finds a workload by name; "oltp_point_select" and "point_select"
// are the same.
func Lookup(name string) (*Workload, error) {
	if w, ok := workloads[strings.TrimPrefix(strings.TrimSuffix(name, ".lua"), "oltp_")]; ok {
		return w, nil
	}
	return nil, fmt.Errorf("unknown workload %q: use one of %s", name, strings.Join(Names(), ", "))
}

// Names lists the workloads in sysbench's order.
func Names() []string {
	order := map[string]int{"point_select": 0, "read_only": 1, "read_write": 2, "write_only": 3, "update_index": 4, "update_non_index": 5, "insert": 6, "delete": 7}
	var out []string
	for n := range workloads {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return order[out[i]] < order[out[j]] })
	return out
}

// The helpers below mirror oltp_common.lua's execute_* functions: each picks
// its own table (get_table_num) and draws ids with the default distribution
// (get_id).

func (m *Mix) table(r *Rand) int { return int(r.Uniform(1, uint32(m.Tables))) }
func (m *Mix) id(r *Rand) int64  { return int64(r.Default(1, uint32(max(m.TableSize, 1)))) }

func pointSelects(ctx context.Context, m *Mix, r *Rand, x Executor, n int) error {
	t := m.table(r)
	for i := 0; i < n; i++ {
		if err := x.Exec(ctx, PointSelect, t, m.id(r)); err != nil {
			return err
		}
	}
	return nil
}

func ranges(ctx context.Context, m *Mix, r *Rand, x Executor, k Kind, n int) error {
	t := m.table(r)
	for i := 0; i < n; i++ {
		id := m.id(r)
		if err := x.Exec(ctx, k, t, id, id+int64(m.RangeSize)-1); err != nil {
			return err
		}
	}
	return nil
}

func allRanges(ctx context.Context, m *Mix, r *Rand, x Executor) error {
	if !m.RangeSelects {
		return nil
	}
	for _, kn := range []struct {
		k Kind
		n int
	}{{SimpleRange, m.SimpleRanges}, {SumRange, m.SumRanges}, {OrderRange, m.OrderRanges}, {DistinctRange, m.DistinctRanges}} {
		if err := ranges(ctx, m, r, x, kn.k, kn.n); err != nil {
			return err
		}
	}
	return nil
}

func indexUpdates(ctx context.Context, m *Mix, r *Rand, x Executor) error {
	t := m.table(r)
	for i := 0; i < m.IndexUpdates; i++ {
		if err := x.Exec(ctx, IndexUpdate, t, m.id(r)); err != nil {
			return err
		}
	}
	return nil
}

func nonIndexUpdates(ctx context.Context, m *Mix, r *Rand, x Executor) error {
	t := m.table(r)
	for i := 0; i < m.NonIndexUpd; i++ {
		c := r.String(cTemplate)
		if err := x.Exec(ctx, NonIndexUpdate, t, c, m.id(r)); err != nil {
			return err
		}
	}
	return nil
}

func deleteInserts(ctx context.Context, m *Mix, r *Rand, x Executor) error {
	t := m.table(r)
	for i := 0; i < m.DeleteInserts; i++ {
		id, k := m.id(r), m.id(r)
		if err := x.Exec(ctx, Delete, t, id); err != nil {
			return err
		}
		if err := x.Exec(ctx, Insert, t, id, k, r.String(cTemplate), r.String(padTemplate)); err != nil {
			return err
		}
	}
	return nil
}

func writes(ctx context.Context, m *Mix, r *Rand, x Executor) error {
	if err := indexUpdates(ctx, m, r, x); err != nil {
		return err
	}
	if err := nonIndexUpdates(ctx, m, r, x); err != nil {
		return err
	}
	return deleteInserts(ctx, m, r, x)
}

// trx wraps body in BEGIN/COMMIT unless --skip-trx.
func trx(ctx context.Context, m *Mix, x Executor, body func() error) error {
	if !m.SkipTrx {
		if err := x.Exec(ctx, Begin, 0); err != nil {
			return err
		}
	}
	if err := body(); err != nil {
		return err
	}
	if !m.SkipTrx {
		return x.Exec(ctx, Commit, 0)
	}
	return nil
}

func rangeKinds(m Mix) []Kind {
	if !m.RangeSelects {
		return nil
	}
	return []Kind{SimpleRange, SumRange, OrderRange, DistinctRange}
}

func init() {
	register(&Workload{Name: "point_select", ReadOnly: true,
		Kinds: func(Mix) []Kind { return []Kind{PointSelect} },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			return pointSelects(ctx, m, r, x, 1) // oltp_point_select.lua: one per event
		}})
	register(&Workload{Name: "read_only", ReadOnly: true,
		Kinds: func(m Mix) []Kind { return append([]Kind{PointSelect}, rangeKinds(m)...) },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			return trx(ctx, m, x, func() error {
				if err := pointSelects(ctx, m, r, x, m.PointSelects); err != nil {
					return err
				}
				return allRanges(ctx, m, r, x)
			})
		}})
	register(&Workload{Name: "read_write",
		Kinds: func(m Mix) []Kind {
			return append(append([]Kind{PointSelect}, rangeKinds(m)...), IndexUpdate, NonIndexUpdate, Delete, Insert)
		},
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			return trx(ctx, m, x, func() error {
				if err := pointSelects(ctx, m, r, x, m.PointSelects); err != nil {
					return err
				}
				if err := allRanges(ctx, m, r, x); err != nil {
					return err
				}
				return writes(ctx, m, r, x)
			})
		}})
	register(&Workload{Name: "write_only",
		Kinds: func(Mix) []Kind { return []Kind{IndexUpdate, NonIndexUpdate, Delete, Insert} },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			return trx(ctx, m, x, func() error { return writes(ctx, m, r, x) })
		}})
	register(&Workload{Name: "update_index",
		Kinds: func(Mix) []Kind { return []Kind{IndexUpdate} },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error { return indexUpdates(ctx, m, r, x) }})
	register(&Workload{Name: "update_non_index",
		Kinds: func(Mix) []Kind { return []Kind{NonIndexUpdate} },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error { return nonIndexUpdates(ctx, m, r, x) }})
	register(&Workload{Name: "delete",
		Kinds: func(Mix) []Kind { return []Kind{Delete} },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			t := int(r.Uniform(1, uint32(m.Tables)))
			return x.Exec(ctx, Delete, t, m.id(r))
		}})
	register(&Workload{Name: "insert",
		Kinds: func(Mix) []Kind { return nil },
		Event: func(ctx context.Context, m *Mix, r *Rand, x Executor) error {
			// oltp_insert.lua: table, then k, c and pad; id 0 lets
			// AUTO_INCREMENT choose (sysbench's default --auto-inc=on).
			t := int(r.Uniform(1, uint32(m.Tables)))
			k := m.id(r)
			c, pad := r.String(cTemplate), r.String(padTemplate)
			return x.Exec(ctx, InsertText, t, int64(0), k, c, pad)
		}})
}
