package schema

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-db/sluice"
)

// alterColumns applies the column changes of one ALTER TABLE (ADD, DROP,
// MODIFY, CHANGE and RENAME COLUMN) to d as MariaDB does
// (mysql_prepare_alter_table): every old column name refers to the table
// as it was before the statement, not to the result of the clauses before
// it. So `CHANGE a b INT, CHANGE b a INT` swaps the two columns; applied
// one clause after the other it renamed a to b and then that same column
// back to a, and rows decoded by column name (a source without full row
// metadata) went to each other's column (issue 29, N6). The columns keep
// their places unless a clause moves them (FIRST, AFTER, resolved against
// the new names, in the statement's order); added columns go last unless
// placed. Keys follow their columns' new names, or lose dropped ones.
func alterColumns(d *tableDef, ref sluice.TableRef, specs []*ast.AlterTableSpec) error {
	orig := d.Columns
	type fate struct {
		drop  bool
		nc    *sluice.Column // the new definition (CHANGE, MODIFY, RENAME COLUMN)
		moved bool           // placed by FIRST or AFTER
	}
	fates := make([]fate, len(orig))
	origIdx := func(name string) int {
		for i, c := range orig {
			if strings.EqualFold(c.Name, name) {
				return i
			}
		}
		return -1
	}
	type placed struct {
		col    sluice.Column
		pos    *ast.ColumnPosition
		def    *ast.ColumnDef
		add    bool
		ifNot  bool
		origin int
	}
	var moves []placed
	var inline []*ast.ColumnDef // column definitions whose inline keys apply
	for _, sp := range specs {
		switch sp.Tp {
		case ast.AlterTableAddColumns:
			for i, c := range sp.NewColumns {
				pos := sp.Position
				if i > 0 {
					pos = &ast.ColumnPosition{Tp: ast.ColumnPositionAfter, RelativeColumn: sp.NewColumns[i-1].Name}
				}
				moves = append(moves, placed{col: columnOf(c), pos: pos, def: c, add: true, ifNot: sp.IfNotExists, origin: -1})
			}
		case ast.AlterTableDropColumn:
			name := sp.OldColumnName.Name.O
			i := origIdx(name)
			if i < 0 || fates[i].drop {
				if sp.IfExists {
					continue
				}
				return unsupported("DROP COLUMN %s: no such column in %s", name, ref)
			}
			fates[i].drop = true
		case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
			old := sp.NewColumns[0].Name.Name.O
			if sp.Tp == ast.AlterTableChangeColumn {
				old = sp.OldColumnName.Name.O
			}
			i := origIdx(old)
			if i < 0 || fates[i].drop {
				if sp.IfExists {
					continue
				}
				return unsupported("%s: no such column %s in %s", map[bool]string{true: "CHANGE", false: "MODIFY"}[sp.Tp == ast.AlterTableChangeColumn], old, ref)
			}
			nc := columnOf(sp.NewColumns[0])
			fates[i].nc = &nc
			inline = append(inline, sp.NewColumns[0])
			if sp.Position != nil && sp.Position.Tp != ast.ColumnPositionNone {
				fates[i].moved = true
				moves = append(moves, placed{col: nc, pos: sp.Position, origin: i})
			}
		case ast.AlterTableRenameColumn:
			old, nw := sp.OldColumnName.Name.O, sp.NewColumnName.Name.O
			i := origIdx(old)
			if i < 0 || fates[i].drop {
				return unsupported("RENAME COLUMN %s: no such column in %s", old, ref)
			}
			c := orig[i]
			if fates[i].nc != nil {
				c = *fates[i].nc
			}
			c.Name = nw
			fates[i].nc = &c
		}
	}
	// Keys first, while they name the old columns only.
	newName := func(col string) (string, bool) {
		i := origIdx(col)
		switch {
		case i < 0:
			return col, true
		case fates[i].drop:
			return "", false
		case fates[i].nc != nil:
			return fates[i].nc.Name, true
		}
		return orig[i].Name, true
	}
	keys := d.Keys[:0:0]
	for _, k := range d.Keys {
		var cols []string
		for _, c := range k.Cols {
			if n, ok := newName(c); ok {
				cols = append(cols, n)
			}
		}
		if len(cols) > 0 {
			k.Cols = cols
			keys = append(keys, k)
		}
	}
	d.Keys = keys
	// The columns in their places, then the moved and added ones.
	cols := make([]sluice.Column, 0, len(orig)+len(moves))
	for i, c := range orig {
		switch {
		case fates[i].drop || fates[i].moved:
		case fates[i].nc != nil:
			cols = append(cols, *fates[i].nc)
		default:
			cols = append(cols, c)
		}
	}
	d.Columns = cols
	for _, m := range moves {
		if m.origin >= 0 && fates[m.origin].nc != nil {
			m.col = *fates[m.origin].nc // renamed again by a later clause
		}
		if m.add && m.ifNot && colIndex(d, m.col.Name) >= 0 {
			continue
		}
		if err := insertColumn(d, m.col, m.pos); err != nil {
			return err
		}
		if m.add {
			inline = append(inline, m.def)
		}
	}
	for _, c := range inline {
		addInlineKeys(d, c)
	}
	return nil
}
