package schema

import (
	"fmt"
	"maps"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/sluice-db/sluice"
)

// RefOf names the table of a TableName, with defaultSchema when it has none.
func RefOf(tn *ast.TableName, defaultSchema string) sluice.TableRef {
	s := tn.Schema.O
	if s == "" {
		s = defaultSchema
	}
	return sluice.TableRef{Schema: s, Name: tn.Name.O}
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sluice.ErrUnsupportedDDL}, args...)...)
}

// Apply updates the tracked schemas with one parsed DDL statement run in
// defaultSchema. Statements that do not change table shapes (TRUNCATE,
// CREATE DATABASE, ALTER TABLE ... ENGINE=...) are accepted and change
// nothing. A statement the tracker cannot follow returns an error wrapping
// sluice.ErrUnsupportedDDL and leaves the state unchanged.
func (t *Tracker) Apply(defaultSchema string, stmt ast.StmtNode) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := stmt.(type) {
	case *ast.CreateTableStmt:
		if s.TemporaryKeyword != ast.TemporaryNone {
			return nil
		}
		ref := RefOf(s.Table, defaultSchema)
		if s.IfNotExists && t.tables[keyOf(ref)] != nil {
			return nil
		}
		if s.ReferTable != nil {
			src := t.tables[keyOf(RefOf(s.ReferTable, defaultSchema))]
			if src == nil {
				return unsupported("CREATE TABLE %s LIKE an untracked table", ref)
			}
			d := &tableDef{Ref: ref, Columns: append([]sluice.Column(nil), src.Columns...), Keys: append([]keyDef(nil), src.Keys...)}
			t.put(d)
			return nil
		}
		if len(s.Cols) == 0 {
			return unsupported("CREATE TABLE %s without column definitions (CREATE ... SELECT)", ref)
		}
		d := &tableDef{Ref: ref}
		for _, c := range s.Cols {
			d.Columns = append(d.Columns, columnOf(c))
			addInlineKeys(d, c)
		}
		for _, c := range s.Constraints {
			addConstraint(d, c)
		}
		t.put(d)
	case *ast.DropTableStmt:
		if s.IsView || s.TemporaryKeyword != ast.TemporaryNone {
			return nil
		}
		for _, tn := range s.Tables {
			delete(t.tables, keyOf(RefOf(tn, defaultSchema)))
		}
		t.version++
	case *ast.RenameTableStmt:
		// Renames run in order, so "a TO tmp, b TO a, tmp TO b" swaps. The
		// statement is atomic: one pair that fails undoes those before it.
		saved, version := maps.Clone(t.tables), t.version
		for _, tt := range s.TableToTables {
			if err := t.rename(RefOf(tt.OldTable, defaultSchema), RefOf(tt.NewTable, defaultSchema)); err != nil {
				t.tables, t.version = saved, version
				return err
			}
		}
	case *ast.TruncateTableStmt, *ast.CreateDatabaseStmt, *ast.AlterDatabaseStmt:
	case *ast.DropDatabaseStmt:
		for k, d := range t.tables {
			if strings.EqualFold(d.Ref.Schema, s.Name.O) {
				delete(t.tables, k)
			}
		}
		t.version++
	case *ast.CreateIndexStmt:
		d, err := t.cloneDef(RefOf(s.Table, defaultSchema))
		if err != nil {
			return err
		}
		if s.IfNotExists && hasKey(d, s.IndexName) {
			return nil // MariaDB: a note, and nothing changes
		}
		addKey(d, s.IndexName, false, s.KeyType == ast.IndexKeyTypeUnique, s.IndexPartSpecifications)
		t.put(d)
	case *ast.DropIndexStmt:
		d, err := t.cloneDef(RefOf(s.Table, defaultSchema))
		if err != nil {
			return err
		}
		dropKey(d, s.IndexName)
		t.put(d)
	case *ast.AlterTableStmt:
		return t.alter(RefOf(s.Table, defaultSchema), s, defaultSchema)
	default:
		return unsupported("%T", stmt)
	}
	return nil
}

func (t *Tracker) put(d *tableDef) {
	d.table = nil
	t.tables[keyOf(d.Ref)] = d
	t.version++
}

func (t *Tracker) cloneDef(ref sluice.TableRef) (*tableDef, error) {
	d := t.tables[keyOf(ref)]
	if d == nil {
		return nil, unsupported("table %s is not tracked (seed the tracker with the tables at the start position)", ref)
	}
	c := &tableDef{Ref: d.Ref, Columns: append([]sluice.Column(nil), d.Columns...)}
	for _, k := range d.Keys {
		c.Keys = append(c.Keys, keyDef{Name: k.Name, Primary: k.Primary, Cols: append([]string(nil), k.Cols...), Other: k.Other})
	}
	return c, nil
}

func (t *Tracker) rename(from, to sluice.TableRef) error {
	d := t.tables[keyOf(from)]
	if d == nil {
		return unsupported("RENAME of untracked table %s", from)
	}
	delete(t.tables, keyOf(from))
	nd := &tableDef{Ref: to, Columns: d.Columns, Keys: d.Keys}
	t.put(nd)
	return nil
}

// alter applies the specs to a copy, so a failing spec leaves nothing half-done.
func (t *Tracker) alter(ref sluice.TableRef, s *ast.AlterTableStmt, defaultSchema string) error {
	d, err := t.cloneDef(ref)
	if err != nil {
		return err
	}
	if err := alterColumns(d, ref, s.Specs); err != nil {
		return err
	}
	var renameTo *sluice.TableRef
	for _, sp := range s.Specs {
		switch sp.Tp {
		case ast.AlterTableAddColumns, ast.AlterTableDropColumn, ast.AlterTableModifyColumn, ast.AlterTableChangeColumn, ast.AlterTableRenameColumn:
			// alterColumns, above.
		case ast.AlterTableAddConstraint:
			addConstraint(d, sp.Constraint)
		case ast.AlterTableDropPrimaryKey:
			dropKey(d, "PRIMARY")
		case ast.AlterTableDropIndex:
			dropKey(d, sp.Name)
		case ast.AlterTableRenameIndex:
			for i := range d.Keys {
				if strings.EqualFold(d.Keys[i].Name, sp.FromKey.O) {
					d.Keys[i].Name = sp.ToKey.O
				}
			}
		case ast.AlterTableRenameTable:
			r := RefOf(sp.NewTable, defaultSchema)
			renameTo = &r
		case ast.AlterTableOption, ast.AlterTableLock, ast.AlterTableAlgorithm, ast.AlterTableForce,
			ast.AlterTableAlterColumn, ast.AlterTableDropForeignKey, ast.AlterTableEnableKeys,
			ast.AlterTableDisableKeys, ast.AlterTableAlterCheck, ast.AlterTableDropCheck,
			ast.AlterTableIndexInvisible, ast.AlterTableOrderByColumns:
			// No change to columns or unique keys.
		default:
			return unsupported("ALTER TABLE %s: %s is not replicated", ref, specName(sp.Tp))
		}
	}
	primaryNotNull(d)
	if renameTo != nil {
		delete(t.tables, keyOf(ref))
		d.Ref = *renameTo
	}
	t.put(d)
	return nil
}

func colIndex(d *tableDef, name string) int {
	for i, c := range d.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

func insertColumn(d *tableDef, c sluice.Column, pos *ast.ColumnPosition) error {
	at := len(d.Columns)
	if pos != nil {
		switch pos.Tp {
		case ast.ColumnPositionFirst:
			at = 0
		case ast.ColumnPositionAfter:
			i := colIndex(d, pos.RelativeColumn.Name.O)
			if i < 0 {
				return unsupported("AFTER %s: no such column in %s", pos.RelativeColumn.Name.O, d.Ref)
			}
			at = i + 1
		}
	}
	d.Columns = append(d.Columns[:at], append([]sluice.Column{c}, d.Columns[at:]...)...)
	return nil
}

func columnOf(c *ast.ColumnDef) sluice.Column {
	tp := c.Tp
	col := sluice.Column{
		Name:     c.Name.Name.O,
		DataType: strings.ToLower(types.TypeToStr(tp.GetType(), tp.GetCharset())),
		FullType: lowerOutsideQuotes(tp.CompactStr()),
		Nullable: true,
		Unsigned: mysql.HasUnsignedFlag(tp.GetFlag()),
		Charset:  tp.GetCharset(),
	}
	fixMariaDBType(&col, tp)
	for _, o := range c.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull, ast.ColumnOptionPrimaryKey:
			col.Nullable = false
		case ast.ColumnOptionNull:
			col.Nullable = true
		case ast.ColumnOptionGenerated:
			col.Generated = true
		case ast.ColumnOptionAutoIncrement:
			col.AutoIncrement = true
		case ast.ColumnOptionComment:
			if v, ok := o.Expr.(ast.ValueExpr); ok {
				col.Comment = fmt.Sprint(v.GetValue())
			}
		case ast.ColumnOptionDefaultValue:
			col.Default = exprText(o.Expr)
		case ast.ColumnOptionCollate:
			// A COLLATE alone names the character set too (the parser
			// leaves it to the option). Without it such a latin1 column
			// had none, and rows decoded without full row metadata kept
			// its bytes as text, not raw bytes (decode/charset.go).
			if co, err := charset.GetCollationByName(o.StrValue); err == nil && col.Charset == "" {
				col.Charset = co.CharsetName
			}
		}
	}
	return col
}

func addInlineKeys(d *tableDef, c *ast.ColumnDef) {
	for _, o := range c.Options {
		switch o.Tp {
		case ast.ColumnOptionPrimaryKey:
			dropKey(d, "PRIMARY")
			d.Keys = append(d.Keys, keyDef{Name: "PRIMARY", Primary: true, Cols: []string{c.Name.Name.O}})
		case ast.ColumnOptionUniqKey:
			d.Keys = append(d.Keys, keyDef{Name: uniqueName(d, c.Name.Name.O), Cols: []string{c.Name.Name.O}})
		}
	}
}

func addConstraint(d *tableDef, c *ast.Constraint) {
	if c.IfNotExists && hasKey(d, c.Name) {
		return // MariaDB: a note, and nothing changes
	}
	switch c.Tp {
	case ast.ConstraintPrimaryKey:
		addKey(d, "PRIMARY", true, true, c.Keys)
	case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		addKey(d, c.Name, false, true, c.Keys)
	case ast.ConstraintKey, ast.ConstraintIndex, ast.ConstraintFulltext, ast.ConstraintVector, ast.ConstraintColumnar:
		addKey(d, c.Name, false, false, c.Keys)
	}
}

// addKey records an index. Only a unique one over whole columns can
// identify rows; the others (not unique, over expressions or column
// prefixes) are kept as Other, for their names.
func addKey(d *tableDef, name string, primary, unique bool, parts []*ast.IndexPartSpecification) {
	// A SPATIAL index reaches here as a FULLTEXT stand-in (tracker_fix.go).
	k := keyDef{Name: strings.TrimPrefix(name, spatialMarker), Primary: primary, Other: !unique}
	for _, p := range parts {
		if p.Column == nil || p.Expr != nil || p.Length > 0 {
			k.Other = true
		}
		if p.Column != nil {
			k.Cols = append(k.Cols, p.Column.Name.O)
		}
	}
	if len(k.Cols) == 0 {
		return
	}
	if primary {
		dropKey(d, "PRIMARY")
		for _, c := range k.Cols {
			if i := colIndex(d, c); i >= 0 {
				d.Columns[i].Nullable = false
			}
		}
	} else if k.Name == "" {
		k.Name = uniqueName(d, k.Cols[0])
	}
	d.Keys = append(d.Keys, k)
}

// uniqueName follows MySQL's naming of unnamed indexes: the first column's
// name, then name_2, name_3...
func uniqueName(d *tableDef, base string) string {
	name := base
	for n := 2; ; n++ {
		taken := false
		for _, k := range d.Keys {
			if strings.EqualFold(k.Name, name) {
				taken = true
			}
		}
		if !taken {
			return name
		}
		name = fmt.Sprintf("%s_%d", base, n)
	}
}

func hasKey(d *tableDef, name string) bool {
	for _, k := range d.Keys {
		if name != "" && strings.EqualFold(k.Name, name) {
			return true
		}
	}
	return false
}

// primaryNotNull makes the primary key's columns NOT NULL, as MariaDB does
// whatever a MODIFY or CHANGE of one of them says: `MODIFY id BIGINT`
// keeps id NOT NULL, and the table keeps its key.
func primaryNotNull(d *tableDef) {
	for _, k := range d.Keys {
		if !k.Primary {
			continue
		}
		for _, c := range k.Cols {
			if i := colIndex(d, c); i >= 0 {
				d.Columns[i].Nullable = false
			}
		}
	}
}

func dropKey(d *tableDef, name string) {
	out := d.Keys[:0]
	for _, k := range d.Keys {
		if !strings.EqualFold(k.Name, name) {
			out = append(out, k)
		}
	}
	d.Keys = out
}

func specName(tp ast.AlterTableType) string {
	switch tp {
	case ast.AlterTablePartition, ast.AlterTableAddPartitions, ast.AlterTableCoalescePartitions, ast.AlterTableDropPartition,
		ast.AlterTableTruncatePartition, ast.AlterTableRemovePartitioning, ast.AlterTableReorganizePartition,
		ast.AlterTableExchangePartition, ast.AlterTableRebuildPartition, ast.AlterTablePartitionOptions:
		return "partitioning"
	case ast.AlterTableImportTablespace, ast.AlterTableDiscardTablespace:
		return "tablespace import/discard"
	}
	return fmt.Sprintf("this kind of change (%d)", tp)
}

// exprText is a DEFAULT expression as text: a literal's value (a string
// unquoted), any other expression as the parser restores it; nil for NULL.
func exprText(e ast.ExprNode) *string {
	if v, ok := e.(ast.ValueExpr); ok {
		if v.GetValue() == nil {
			return nil
		}
		s := fmt.Sprint(v.GetValue())
		return &s
	}
	var b strings.Builder
	if err := e.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return nil
	}
	s := b.String()
	return &s
}

// lowerOutsideQuotes lower-cases a column type as information_schema's
// COLUMN_TYPE writes it, but not the values of an ENUM or SET: those keep
// their case, as the server keeps them ('S' and 's' are different).
func lowerOutsideQuotes(s string) string {
	b := []byte(s)
	in := false
	for i, c := range b {
		switch {
		case c == '\'':
			in = !in // a doubled quote inside toggles twice
		case !in && c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
