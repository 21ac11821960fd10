// Package snapfilter makes replication after a full copy exact when the copy
// was read from more than one snapshot.
//
// A full copy that is interrupted and resumed reads its remaining chunks
// from a new snapshot, so the target holds each chunk as the source had it
// at that chunk's own snapshot position. Replication starts from the
// earliest position. A change to a row is already in the target when its
// transaction is contained in the snapshot of the chunk the row's key falls
// in; applying it again would double it (a second copy of a row in a table
// without a key) or fail on a duplicate key. The filter drops exactly those
// changes, and splits an update that moves a key from one chunk to another
// into the halves that are still missing. Changes after the last snapshot
// pass untouched, so the filter costs one containment check per transaction
// once replication is past the copy.
//
// Key-level decisions need the row's key compared with the chunk bounds in
// the server's own order. Go can do that exactly for integer keys only; so a
// table whose chunks come from several snapshots must have an integer
// primary key and no other unique key (the full copy reloads any other
// partially copied table whole from the newer snapshot, see load.Config).
package snapfilter

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dumpfmt"
)

// Chunk is one copied chunk: its key range (Lo, Hi] and the snapshot
// position it was read at.
type Chunk struct {
	Index  int
	Lo, Hi dumpfmt.Key
	Pos    sluice.Position
}

// Table is one copied target table (Name is its quoted `schema`.`table`)
// and its chunks. Created is the snapshot of the run that planned it, which
// made the target table: its definition is the source's at that position.
type Table struct {
	Name    string
	Chunks  []Chunk
	Created sluice.Position
}

// Filter decides which replicated changes a multi-snapshot copy already
// holds. It is used by one goroutine.
type Filter struct {
	snaps  []*snapshot
	tables map[string]*table

	// The open transaction.
	gtid    string
	inAny   bool // contained in at least one snapshot: key decisions needed
	inAll   bool // contained in every snapshot: every change is in the copy
	decided bool
	// xa: the open transaction is an XA prepare group, whose rows pass
	// untouched (see xaCommit).
	xa       bool
	checked  map[*sluice.Table]bool
	filtered uint64
}

type snapshot struct {
	pos     sluice.Position
	maria   map[uint32]uint64 // MariaDB gtid_binlog_pos: domain -> seq
	mysql   gomysql.GTIDSet
	contain bool // the open transaction is contained (valid while decided)
}

type table struct {
	name    string
	created *snapshot
	single  *snapshot // every chunk has this snapshot
	// Otherwise, chunks in key order with their upper bounds.
	his    [][]*big.Int // nil entry: open (the last chunk)
	snapOf []*snapshot
}

// New builds a filter for a finished copy. It returns nil when no table was
// copied (nothing to filter).
func New(tables []Table) (*Filter, error) {
	f := &Filter{tables: map[string]*table{}, checked: map[*sluice.Table]bool{}}
	byPos := map[string]*snapshot{}
	snapOf := func(p sluice.Position) (*snapshot, error) {
		k := p.String()
		if s, ok := byPos[k]; ok {
			return s, nil
		}
		s, err := newSnapshot(p)
		if err != nil {
			return nil, err
		}
		byPos[k] = s
		f.snaps = append(f.snaps, s)
		return s, nil
	}
	for _, tb := range tables {
		if len(tb.Chunks) == 0 {
			continue
		}
		chunks := append([]Chunk(nil), tb.Chunks...)
		sort.Slice(chunks, func(i, j int) bool { return chunks[i].Index < chunks[j].Index })
		t := &table{name: tb.Name}
		var err error
		if t.created, err = snapOf(tb.Created); err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", tb.Name, err)
		}
		mixed := false
		for _, c := range chunks {
			s, err := snapOf(c.Pos)
			if err != nil {
				return nil, fmt.Errorf("snapshot of %s chunk %d: %w", tb.Name, c.Index, err)
			}
			t.snapOf = append(t.snapOf, s)
			mixed = mixed || s != t.snapOf[0]
		}
		if !mixed {
			t.single, t.snapOf = t.snapOf[0], nil
			f.tables[tb.Name] = t
			continue
		}
		for i, c := range chunks {
			if i == len(chunks)-1 && c.Hi == nil {
				t.his = append(t.his, nil)
				continue
			}
			hi, ok := intKey(c.Hi)
			if !ok {
				return nil, mixedError(tb.Name, "its key is not an integer")
			}
			t.his = append(t.his, hi)
		}
		f.tables[tb.Name] = t
	}
	if len(f.tables) == 0 {
		return nil, nil
	}
	return f, nil
}

func mixedError(name, why string) error {
	return &sluice.Error{Op: "replicate after the full copy",
		Err:  fmt.Errorf("%w: %s was copied from several snapshots (the copy was resumed) and %s, so its changes cannot be matched to chunks", sluice.ErrConfig, name, why),
		Hint: "drop " + name + " on the target, delete its rows from sluice_meta.load_checkpoint, and run sluice migrate --mode all again (--mode all reloads such a table whole)"}
}

func newSnapshot(p sluice.Position) (*snapshot, error) {
	s := &snapshot{pos: p}
	g := strings.TrimSpace(p.GTIDSet)
	switch {
	case g == "":
	case strings.Contains(g, ":"):
		set, err := gomysql.ParseMysqlGTIDSet(g)
		if err != nil {
			return nil, err
		}
		s.mysql = set
	default:
		s.maria = map[uint32]uint64{}
		for _, part := range strings.Split(g, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			d, seq, err := parseMaria(part)
			if err != nil {
				return nil, err
			}
			if seq > s.maria[d] {
				s.maria[d] = seq
			}
		}
	}
	return s, nil
}

// parseMaria parses "domain-server-seq" without allocating: it runs once
// per replicated transaction.
func parseMaria(g string) (domain uint32, seq uint64, err error) {
	d, rest, ok1 := strings.Cut(g, "-")
	_, n, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("bad MariaDB GTID %q", g)
	}
	dv, err1 := strconv.ParseUint(d, 10, 32)
	nv, err2 := strconv.ParseUint(n, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad MariaDB GTID %q", g)
	}
	return uint32(dv), nv, nil
}

// contains reports whether the transaction with gtid, one of whose events
// ends at pos, is contained in snapshot s. A snapshot is taken between
// transactions, so comparing any event's end with it says on which side the
// whole transaction lies.
func (s *snapshot) contains(gtid string, pos sluice.Position) (bool, error) {
	switch {
	case gtid != "" && s.maria != nil && !strings.Contains(gtid, ":"):
		d, seq, err := parseMaria(gtid)
		if err != nil {
			return false, err
		}
		have, ok := s.maria[d]
		return ok && seq <= have, nil
	case gtid != "" && s.mysql != nil && strings.Contains(gtid, ":"):
		one, err := gomysql.ParseMysqlGTIDSet(gtid)
		if err != nil {
			return false, err
		}
		return s.mysql.Contain(one), nil
	case pos.File != "" && s.pos.File != "":
		return pos.Compare(s.pos) <= 0, nil
	}
	return false, fmt.Errorf("cannot place transaction %q at %s against snapshot %s", gtid, pos, s.pos)
}

// Filtered is the number of row changes dropped so far.
func (f *Filter) Filtered() uint64 { return f.filtered }

// Item filters one stream item in place: it returns false when the item is
// to be dropped (a Rows item left without changes). pos is the end of the
// binlog event the item came from. DDL between the first and the last
// snapshot is refused: a table may already have it and a chunk may not.
func (f *Filter) Item(it *sluice.StreamItem, pos sluice.Position) (bool, error) {
	switch it.Kind {
	case sluice.ItemBegin:
		f.gtid, f.decided, f.xa = it.GTID, false, it.XID != ""
		return true, nil
	case sluice.ItemCommit, sluice.ItemXAPrepare, sluice.ItemRollback:
		f.decided, f.xa = false, false
		return true, nil
	case sluice.ItemXACommit:
		return f.xaCommit(it, pos)
	case sluice.ItemXARollback:
		return true, nil
	case sluice.ItemDDL:
		f.gtid, f.decided = it.GTID, false
		if err := f.decide(pos); err != nil {
			return false, err
		}
		f.decided = false
		switch {
		case f.inAll:
			return false, nil // every copied table was made and read after it
		case !f.inAny:
			return true, nil
		}
		return f.ddlBetween(it)
	case sluice.ItemRows:
		if f.xa {
			return true, nil
		}
		if !f.decided {
			if err := f.decide(pos); err != nil {
				return false, err
			}
		}
		if !f.inAny {
			return true, nil
		}
		out := it.Changes[:0:0]
		for _, c := range it.Changes {
			var err error
			out, err = f.change(out, c)
			if err != nil {
				return false, err
			}
		}
		it.Changes = out
		return len(out) > 0, nil
	}
	return true, nil
}

// xaCommit decides the completion of a prepared XA transaction. Its rows
// are in a snapshot's copy when its XA COMMIT, not its prepare, came
// before that snapshot, so the prepare group's rows pass the filter
// untouched and are held by the applier. A commit contained in no snapshot
// is right to apply them all: no chunk holds them. A commit contained in
// a snapshot means some chunks hold its rows; the held rows cannot be
// split by chunk any more, so the task stops rather than double them.
func (f *Filter) xaCommit(it *sluice.StreamItem, pos sluice.Position) (bool, error) {
	f.gtid, f.decided, f.xa = it.GTID, false, false
	if err := f.decide(pos); err != nil {
		return false, err
	}
	f.decided = false
	if !f.inAny {
		return true, nil
	}
	return false, &sluice.Error{Op: "replicate after the full copy",
		Err: fmt.Errorf("%w: the XA transaction %s was committed on the source (GTID %s) while the interrupted full copy was stopped, so part of the copy holds its rows and part does not",
			sluice.ErrConfig, it.XID, it.GTID),
		Hint: "drop the copied tables and the task's rows in sluice_meta on the target and run sluice migrate --mode all again"}
}

// ddlBetween decides a DDL that ran between the copy's first and last
// snapshot. It is applied when every table it names was made and read
// wholly before it, and skipped when every one was made and read after it.
// A table in between (made before, some rows read after, as a resumed copy
// leaves it) is refused: a TRUNCATE or DROP would have to be skipped for
// some rows and not for others, and only a fresh copy is right. A change
// of indexes alone (indexOnly) changes no row, so it is applied to such a
// table: the target table has the definition it was made with, from
// before the statement.
func (f *Filter) ddlBetween(it *sluice.StreamItem) (bool, error) {
	refuse := func(what string) (bool, error) {
		return false, &sluice.Error{Op: "replicate after the full copy",
			Err:  fmt.Errorf("%w: DDL %q ran on the source while the interrupted full copy was stopped, and %s", sluice.ErrUnsupportedDDL, oneLine(it.Source), what),
			Hint: "drop the copied tables and the task's rows in sluice_meta on the target and run sluice migrate --mode all again"}
	}
	if len(it.Tables) == 0 {
		if q := strings.ToUpper(strings.Join(strings.Fields(it.Source), " ")); strings.HasPrefix(q, "DROP DATABASE") || strings.HasPrefix(q, "DROP SCHEMA") {
			return refuse("it drops a schema that the copy read in part")
		}
		return true, nil
	}
	before, after := 0, 0
	index := indexOnly(it.Source)
	for _, ref := range it.Tables {
		t := f.tables[ref.Quoted()]
		if t == nil {
			before++ // not copied: the target follows the stream alone
			continue
		}
		some, all := t.chunksContain()
		switch {
		case !t.created.contain && !some:
			before++
		case t.created.contain && all:
			after++
		case index && !t.created.contain:
			before++ // made before it, so without it; its rows are right either way
		default:
			return refuse(t.name + " was copied partly before and partly after it")
		}
	}
	if before > 0 && after > 0 {
		return refuse("it names tables copied before it and tables copied after it")
	}
	return after == 0, nil
}

// chunksContain reports whether any and whether all of t's chunks contain
// the open transaction.
func (t *table) chunksContain() (some, all bool) {
	if t.single != nil {
		return t.single.contain, t.single.contain
	}
	all = true
	for _, s := range t.snapOf {
		some = some || s.contain
		all = all && s.contain
	}
	return some, all
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func (f *Filter) decide(pos sluice.Position) error {
	f.inAny, f.inAll = false, true
	for _, s := range f.snaps {
		c, err := s.contains(f.gtid, pos)
		if err != nil {
			return err
		}
		s.contain = c
		f.inAny = f.inAny || c
		f.inAll = f.inAll && c
	}
	f.decided = true
	return nil
}

// change appends what is left of c to out.
func (f *Filter) change(out []sluice.RowChange, c sluice.RowChange) ([]sluice.RowChange, error) {
	t := f.tables[c.Table.Ref.Quoted()]
	if t == nil {
		return append(out, c), nil // not part of the copy
	}
	if t.single != nil {
		if t.single.contain {
			f.filtered++
			return out, nil
		}
		return append(out, c), nil
	}
	if !f.checked[c.Table] {
		if !c.Table.PKIsPrimary || len(c.Table.UniqueKeys) > 1 {
			return nil, mixedError(t.name, "it has a unique key besides an integer primary key")
		}
		f.checked[c.Table] = true
	}
	in := func(row []any) (bool, error) {
		k, err := rowKey(c.Table, row)
		if err != nil {
			return false, mixedError(t.name, err.Error())
		}
		return t.snapOf[t.chunkOf(k)].contain, nil
	}
	switch c.Kind {
	case sluice.Insert, sluice.Delete:
		row := c.After
		if c.Kind == sluice.Delete {
			row = c.Before
		}
		have, err := in(row)
		if err != nil {
			return nil, err
		}
		if have {
			f.filtered++
			return out, nil
		}
		return append(out, c), nil
	case sluice.Update:
		hb, err := in(c.Before)
		if err != nil {
			return nil, err
		}
		ha, err := in(c.After)
		if err != nil {
			return nil, err
		}
		switch {
		case !hb && !ha:
			return append(out, c), nil
		case hb && ha:
			f.filtered++
			return out, nil
		case hb:
			// The old key's chunk was read after the update (the row is
			// gone there); the new key's chunk before it.
			f.filtered++
			return append(out, sluice.RowChange{Kind: sluice.Insert, Table: c.Table, After: c.After}), nil
		default:
			f.filtered++
			return append(out, sluice.RowChange{Kind: sluice.Delete, Table: c.Table, Before: c.Before}), nil
		}
	}
	return append(out, c), nil
}

// chunkOf returns the index (in key order) of the chunk holding key k: the
// first chunk whose upper bound is at least k.
func (t *table) chunkOf(k []*big.Int) int {
	return sort.Search(len(t.his), func(i int) bool {
		return t.his[i] == nil || compare(k, t.his[i]) <= 0
	})
}

func compare(a, b []*big.Int) int {
	for i := range a {
		if i >= len(b) {
			return 1
		}
		if c := a[i].Cmp(b[i]); c != 0 {
			return c
		}
	}
	if len(a) < len(b) {
		return -1
	}
	return 0
}

// intKey parses a chunk bound of integer key columns.
func intKey(k dumpfmt.Key) ([]*big.Int, bool) {
	if k == nil {
		return nil, false
	}
	out := make([]*big.Int, len(k))
	for i, p := range k {
		if p.S == nil {
			return nil, false
		}
		n, ok := new(big.Int).SetString(*p.S, 10)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// rowKey returns a row's primary key as integers.
func rowKey(t *sluice.Table, row []any) ([]*big.Int, error) {
	out := make([]*big.Int, len(t.PK))
	for i, ci := range t.PK {
		if ci >= len(row) {
			return nil, fmt.Errorf("its row has no column %d", ci)
		}
		n := new(big.Int)
		switch v := row[ci].(type) {
		case int8:
			n.SetInt64(int64(v))
		case int16:
			n.SetInt64(int64(v))
		case int32:
			n.SetInt64(int64(v))
		case int64:
			n.SetInt64(v)
		case int:
			n.SetInt64(int64(v))
		case uint8:
			n.SetUint64(uint64(v))
		case uint16:
			n.SetUint64(uint64(v))
		case uint32:
			n.SetUint64(uint64(v))
		case uint64:
			n.SetUint64(v)
		case uint:
			n.SetUint64(uint64(v))
		default:
			return nil, fmt.Errorf("its key column %s holds %T, not an integer", t.Columns[ci].Name, row[ci])
		}
		out[i] = n
	}
	return out, nil
}
