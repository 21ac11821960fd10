package decode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

func (d *Decoder) unsupported(pos sluice.Position, q string, err error) error {
	if !errors.Is(err, sluice.ErrUnsupportedDDL) {
		err = fmt.Errorf("%w: %v", sluice.ErrUnsupportedDDL, err)
	}
	return &sluice.Error{
		Op:   fmt.Sprintf("replicate DDL at %s (%s)", posString(pos), oneLine(q)),
		Err:  err,
		Hint: unsupportedHint(pos, q),
	}
}

func (d *Decoder) schemaSelected(s string) bool {
	if systemSchemas[strings.ToLower(s)] {
		return false
	}
	return d.cfg.SchemaSelected == nil || d.cfg.SchemaSelected(s)
}

func (d *Decoder) routeSchema(s string) string {
	if d.cfg.RouteSchema == nil {
		return s
	}
	return d.cfg.RouteSchema(s)
}

// ddl handles a statement outside a row transaction. Nothing is emitted
// (and the tracker is not changed) unless every statement in the event is
// understood, so an unsupported statement leaves nothing half-applied.
// gtidPos, when set, is the GTID position the item's End carries instead of
// the one after the current group (a statement inside a group).
func (d *Decoder) ddl(defaultSchema, q string, pos sluice.Position, ts uint32, gtidPos *string) error {
	d.ddlGroup = false
	d.ddlTables = nil
	d.ddlSame = false
	d.tracker.SetSQLMode(d.session.SQLMode&modeANSIQuotes != 0, d.session.SQLMode&modeNoBackslashEscapes != 0)
	defer d.tracker.SetSQLMode(false, false)
	if err := d.compressedDDL(defaultSchema, q, pos); err != nil { // compressed.go
		return err
	}
	stmts, err := d.tracker.Parse(q)
	if err != nil {
		if defaultSchema != "" && !d.schemaSelected(defaultSchema) && !mentionsSelected(q, d) {
			return nil
		}
		return d.unsupported(pos, q, fmt.Errorf("cannot parse: %v", err))
	}
	verBefore := d.tracker.Version()
	var out []string
	if len(stmts) == 1 {
		// One statement: its own text is what the target runs (ddltext.go).
		d.src = sourceStmt{text: q, ansiQuotes: d.session.SQLMode&modeANSIQuotes != 0, noBackslash: d.session.SQLMode&modeNoBackslashEscapes != 0}
	}
	for _, st := range stmts {
		sqls, err := d.ddlStmt(defaultSchema, st)
		if err != nil {
			d.src = sourceStmt{}
			return d.unsupported(pos, q, err)
		}
		out = append(out, sqls...)
	}
	d.src = sourceStmt{}
	if len(out) == 0 && d.tracker.Version() == verBefore {
		return nil
	}
	item := sluice.StreamItem{Kind: sluice.ItemDDL, GTID: d.gtid, Timestamp: ts, Micros: d.micros, End: d.endPos(pos), DDL: out, Source: q, Tables: d.ddlTables,
		Session: d.session, SameShape: d.ddlSame}
	if gtidPos != nil {
		item.End.GTIDSet = *gtidPos
	}
	if defaultSchema != "" && d.schemaSelected(defaultSchema) {
		item.Schema = d.routeSchema(defaultSchema)
	}
	snap, err := d.tracker.Snapshot()
	if err != nil {
		return err
	}
	item.SchemaState = snap
	// The tables' shapes changed: rebuild cached table maps.
	clear(d.tables)
	d.out = append(d.out, item)
	return nil
}

// mentionsSelected is the conservative test for statements the parser
// cannot read: any selected schema named in the text counts.
func mentionsSelected(q string, d *Decoder) bool {
	if d.cfg.SchemaSelected == nil {
		return true
	}
	for _, w := range strings.FieldsFunc(q, func(r rune) bool { return r == ' ' || r == '.' || r == '`' || r == '(' || r == ',' }) {
		if d.schemaSelected(w) {
			return true
		}
	}
	return false
}

// ddlStmt applies one statement to the tracker and returns its target form.
func (d *Decoder) ddlStmt(def string, st ast.StmtNode) ([]string, error) {
	src := d.src
	d.src = sourceStmt{} // an online schema change's statements are not the source's text
	if out, handled, err := d.online(def, st); handled {
		return out, err
	}
	if err := d.sequenceDDL(def, st); err != nil { // sequence.go
		return nil, err
	}
	d.src = src
	var names []*ast.TableName // every table name to route
	switch s := st.(type) {
	case *ast.CreateTableStmt:
		if s.TemporaryKeyword != ast.TemporaryNone {
			return nil, nil
		}
		if d.tracker.OrReplace(s) {
			// CREATE OR REPLACE TABLE: MariaDB drops the table first. On
			// the target too, as two idempotent statements (a crash between
			// them and the checkpoint runs both again). The DROP gets its
			// own name node: routing rewrites names in place.
			d.tracker.ForgetOrReplace()
			drop := &ast.DropTableStmt{IfExists: true, Tables: []*ast.TableName{{Schema: s.Table.Schema, Name: s.Table.Name}}}
			src := d.src
			d.src = sourceStmt{}
			pre, err := d.ddlStmt(def, drop)
			d.src = src
			if err != nil {
				return nil, err
			}
			rest, err := d.ddlStmt(def, s)
			if err == nil && len(rest) == 1 && d.sent {
				// The source's CREATE OR REPLACE itself: MariaDB drops
				// and creates in one statement on the target too.
				return rest, nil
			}
			return append(pre, rest...), err
		}
		names = []*ast.TableName{s.Table}
		if s.ReferTable != nil {
			names = append(names, s.ReferTable)
		}
		s.IfNotExists = true
	case *ast.DropTableStmt:
		if s.IsView || s.TemporaryKeyword != ast.TemporaryNone {
			return nil, nil
		}
		var keep []*ast.TableName
		for _, tn := range s.Tables {
			if d.selected(schema.RefOf(tn, def)) {
				keep = append(keep, tn)
			}
		}
		if err := d.tracker.Apply(def, s); err != nil {
			return nil, err
		}
		if len(keep) == 0 {
			return nil, nil
		}
		if len(keep) < len(s.Tables) {
			d.src = sourceStmt{} // the text names tables the target must keep
		}
		s.Tables, s.IfExists = keep, true
		return d.restoreRouted(def, s, keep)
	case *ast.RenameTableStmt:
		in, out := 0, 0
		for _, tt := range s.TableToTables {
			a, b := d.selected(schema.RefOf(tt.OldTable, def)), d.selected(schema.RefOf(tt.NewTable, def))
			if a != b {
				return nil, fmt.Errorf("renaming %s to %s moves a table into or out of the replicated tables", schema.RefOf(tt.OldTable, def), schema.RefOf(tt.NewTable, def))
			}
			if a {
				in++
			} else {
				out++
			}
			names = append(names, tt.OldTable, tt.NewTable)
		}
		if in > 0 && out > 0 {
			return nil, fmt.Errorf("one RENAME TABLE renames both replicated and other tables")
		}
	case *ast.TruncateTableStmt:
		names = []*ast.TableName{s.Table}
	case *ast.CreateIndexStmt:
		names = []*ast.TableName{s.Table}
		s.IfNotExists = true
	case *ast.DropIndexStmt:
		names = []*ast.TableName{s.Table}
		s.IfExists = true
	case *ast.AlterTableStmt:
		names = []*ast.TableName{s.Table}
		for _, sp := range s.Specs {
			switch sp.Tp {
			case ast.AlterTableAddColumns:
				sp.IfNotExists = true
			case ast.AlterTableDropColumn, ast.AlterTableDropIndex, ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
				sp.IfExists = true
			case ast.AlterTableAddConstraint:
				if sp.Constraint != nil && sp.Constraint.Tp != ast.ConstraintPrimaryKey && sp.Constraint.Tp != ast.ConstraintForeignKey && sp.Constraint.Tp != ast.ConstraintCheck {
					sp.Constraint.IfNotExists = true
				}
			case ast.AlterTableRenameTable:
				a, b := d.selected(schema.RefOf(s.Table, def)), d.selected(schema.RefOf(sp.NewTable, def))
				if a != b {
					return nil, fmt.Errorf("ALTER TABLE ... RENAME moves %s into or out of the replicated tables", schema.RefOf(s.Table, def))
				}
				names = append(names, sp.NewTable)
			}
		}
	case *ast.CreateDatabaseStmt:
		if !d.schemaSelected(s.Name.O) {
			return nil, nil
		}
		s.Name = ast.NewCIStr(d.routeSchema(s.Name.O))
		s.IfNotExists = true
		return restore(s)
	case *ast.DropDatabaseStmt:
		if err := d.tracker.Apply(def, s); err != nil {
			return nil, err
		}
		if !d.schemaSelected(s.Name.O) {
			return nil, nil
		}
		if t := d.routeSchema(s.Name.O); !strings.EqualFold(t, s.Name.O) {
			return nil, fmt.Errorf("DROP DATABASE %s would drop the routed target schema %s, which may hold other sources' tables", s.Name.O, t)
		}
		s.IfExists = true
		return restore(s)
	case *ast.AlterDatabaseStmt:
		if s.AlterDefaultDatabase || !d.schemaSelected(s.Name.O) {
			return nil, nil
		}
		s.Name = ast.NewCIStr(d.routeSchema(s.Name.O))
		return restore(s)
	default:
		if _, ok := st.(ast.DDLNode); ok && (def == "" || d.schemaSelected(def)) {
			if isIgnoredDDL(st) {
				return nil, nil
			}
			return nil, fmt.Errorf("%T is not replicated", st)
		}
		return nil, nil // GRANT, SET, FLUSH...: nothing to replicate
	}
	anySelected := false
	for _, tn := range names {
		anySelected = anySelected || d.selected(schema.RefOf(tn, def))
	}
	if !anySelected {
		// Keep following the table in case it is renamed into the set later;
		// a failure here concerns a table we do not replicate.
		_ = d.tracker.Apply(def, st)
		return nil, nil
	}
	var before []sluice.Column
	if at, ok := st.(*ast.AlterTableStmt); ok && renamesColumn(at) {
		if tb := d.tracker.Table(schema.RefOf(at.Table, def)); tb != nil {
			before = tb.Columns
		}
	}
	if err := d.tracker.Apply(def, st); err != nil {
		return nil, err
	}
	if before != nil {
		// Columns renamed among themselves, the names in the same order:
		// the target's definition may read the same after as before.
		if tb := d.tracker.Table(schema.RefOf(st.(*ast.AlterTableStmt).Table, def)); tb != nil && columnNamesEqual(before, tb.Columns) {
			d.ddlSame = true
		}
	}
	return d.restoreRouted(def, st, names)
}

func renamesColumn(at *ast.AlterTableStmt) bool {
	for _, sp := range at.Specs {
		switch sp.Tp {
		case ast.AlterTableChangeColumn:
			if sp.OldColumnName != nil && len(sp.NewColumns) > 0 && !strings.EqualFold(sp.OldColumnName.Name.O, sp.NewColumns[0].Name.Name.O) {
				return true
			}
		case ast.AlterTableRenameColumn:
			return true
		}
	}
	return false
}

func columnNamesEqual(a, b []sluice.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i].Name, b[i].Name) {
			return false
		}
	}
	return true
}

func isIgnoredDDL(st ast.StmtNode) bool {
	switch st.(type) {
	case *ast.CreateViewStmt, *ast.CreateSequenceStmt, *ast.DropSequenceStmt, *ast.AlterSequenceStmt, *ast.CreatePlacementPolicyStmt:
		return true
	}
	return false
}

// restoreRouted returns the target form of st: the source's text with the
// table names routed (ddltext.go), or, when that text cannot be used, the
// statement rendered from the parse with each table name explicit and routed.
func (d *Decoder) restoreRouted(def string, st ast.StmtNode, names []*ast.TableName) ([]string, error) {
	d.sent = false
	if text, ok := d.sourceText(def, st, names); ok {
		for _, tn := range names {
			d.ddlTables = append(d.ddlTables, d.route(schema.RefOf(tn, def)))
		}
		d.sent = true
		return []string{text}, nil
	}
	for _, tn := range names {
		to := d.route(schema.RefOf(tn, def))
		tn.Schema, tn.Name = ast.NewCIStr(to.Schema), ast.NewCIStr(to.Name)
		d.ddlTables = append(d.ddlTables, to)
	}
	return restore(st)
}

func restore(st ast.StmtNode) ([]string, error) {
	var sb strings.Builder
	// Without a default-charset introducer on string literals: the parser
	// gives every literal that has none the default charset, and writing it
	// back as _utf8mb4'...' would change the text the target keeps for
	// generated columns and defaults (SHOW CREATE differs). Explicit other
	// charsets (_latin1'...') are kept.
	if err := st.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags|format.RestoreStringWithoutDefaultCharset, &sb)); err != nil {
		return nil, fmt.Errorf("rewrite statement: %w", err)
	}
	return []string{schema.RestoreTypes(sb.String())}, nil
}
