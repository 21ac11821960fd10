package decode

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// Online schema changes (gh-ost, pt-online-schema-change) build a ghost
// copy of a table (_t_gho, _t_new), ALTER it, fill it with the table's rows
// and the changes made meanwhile, and swap it in with a RENAME (t to
// _t_del or _t_old, the ghost to t). Replicated literally, the target
// would copy every row again into a ghost table, perhaps one outside
// tables.include. As DM's online-ddl does, sluice leaves the ghost and
// helper tables (_t_ghc, _t_del, _t_old) off the target, keeps the ghost's
// ALTERs in the schema tracker (saved with each checkpoint), and at the
// cut-over runs them on t itself: the target sees one ALTER TABLE t.
//
// A name alone proves nothing: `_orders_old` may be a real table, and
// `RENAME TABLE d3 TO _d3_old` a user's own rename (issue 29, N5). So the
// rules apply only when the task names the tool (Config.OnlineDDL), and
// only inside one of its sequences: a helper is one whose CREATE the
// stream showed (the tracker's online set, saved with each checkpoint),
// or the old table a cut-over renamed aside. Any other table is an
// ordinary table, whatever its name.

// OnlineDDL tools, the values of Config.OnlineDDL.
const (
	OnlineNone  = "none"
	OnlineGhost = "gh-ost"
	OnlinePTOSC = "pt-osc"
)

var ghostName = regexp.MustCompile(`^_(.+)_(gho|ghc|del|new|old)$`)

// toolKinds: the helper kinds each tool creates with CREATE TABLE, its
// ghost kind, and the kind its cut-over renames the old table to.
var toolKinds = map[string]struct {
	created       map[string]bool
	ghost, oldTab string
}{
	OnlineGhost: {created: map[string]bool{"gho": true, "ghc": true, "del": true}, ghost: "gho", oldTab: "del"},
	OnlinePTOSC: {created: map[string]bool{"new": true}, ghost: "new", oldTab: "old"},
}

// helperName reports whether ref is named as a helper table of the task's
// tool for a replicated, tracked table, and which: its real table and the
// kind (gho, ghc, del for gh-ost; new, old for pt-online-schema-change).
// It says nothing of whether a sequence is running: see ghostOf.
func (d *Decoder) helperName(ref sluice.TableRef) (sluice.TableRef, string, bool) {
	tool, ok := toolKinds[d.cfg.OnlineDDL]
	if !ok {
		return sluice.TableRef{}, "", false
	}
	m := ghostName.FindStringSubmatch(strings.ToLower(ref.Name))
	if m == nil || !tool.created[m[2]] && m[2] != tool.oldTab {
		return sluice.TableRef{}, "", false
	}
	real := sluice.TableRef{Schema: ref.Schema, Name: ref.Name[1 : 1+len(m[1])]}
	if !d.selectedTable(real) || d.tracker.Table(real) == nil {
		return sluice.TableRef{}, "", false
	}
	return real, m[2], true
}

// ghostOf reports whether ref is a helper table of a running online schema
// change (one the stream created, or a cut-over's old table), and which.
func (d *Decoder) ghostOf(ref sluice.TableRef) (sluice.TableRef, string, bool) {
	real, kind, ok := d.helperName(ref)
	if !ok || !d.tracker.IsOnline(ghostKey(ref)) {
		return sluice.TableRef{}, "", false
	}
	return real, kind, true
}

// ghostTable is the name the task's tool gives the ghost of real.
func (d *Decoder) ghostTable(real sluice.TableRef) sluice.TableRef {
	return sluice.TableRef{Schema: real.Schema, Name: "_" + real.Name + "_" + toolKinds[d.cfg.OnlineDDL].ghost}
}

func ghostKey(ref sluice.TableRef) string { return strings.ToLower(ref.Schema + "." + ref.Name) }

// online handles a statement of an online schema change; handled false
// leaves it to ddlStmt.
func (d *Decoder) online(def string, st ast.StmtNode) (out []string, handled bool, err error) {
	switch s := st.(type) {
	case *ast.CreateTableStmt:
		ref := schema.RefOf(s.Table, def)
		if _, kind, ok := d.helperName(ref); ok && toolKinds[d.cfg.OnlineDDL].created[kind] && s.TemporaryKeyword == ast.TemporaryNone {
			d.tracker.StartOnline(ghostKey(ref)) // a sequence starts: the table is a helper until dropped
			return nil, true, nil
		}
	case *ast.AlterTableStmt:
		ref := schema.RefOf(s.Table, def)
		if _, _, ok := d.ghostOf(ref); ok {
			text, err := restore(s)
			if err != nil {
				return nil, true, err
			}
			d.tracker.AddOnline(ghostKey(ref), strings.Join(text, ";\n"))
			return nil, true, nil
		}
	case *ast.TruncateTableStmt:
		_, _, ok := d.ghostOf(schema.RefOf(s.Table, def))
		return nil, ok, nil
	case *ast.DropTableStmt:
		var keep []*ast.TableName
		for _, tn := range s.Tables {
			ref := schema.RefOf(tn, def)
			if _, _, ok := d.ghostOf(ref); ok {
				d.tracker.TakeOnline(ghostKey(ref)) // an abandoned change, or its old table
				continue
			}
			keep = append(keep, tn)
		}
		if len(keep) == len(s.Tables) {
			return nil, false, nil
		}
		if len(keep) == 0 {
			return nil, true, nil
		}
		s.Tables = keep
		return nil, false, nil // the rest as any DROP
	case *ast.RenameTableStmt:
		var outs []string
		cut, other := 0, 0
		for _, tt := range s.TableToTables {
			from, to := schema.RefOf(tt.OldTable, def), schema.RefOf(tt.NewTable, def)
			if real, kind, ok := d.helperName(to); ok && kind == toolKinds[d.cfg.OnlineDDL].oldTab && strings.EqualFold(real.Name, from.Name) &&
				strings.EqualFold(real.Schema, from.Schema) && d.tracker.IsOnline(ghostKey(d.ghostTable(real))) {
				// t moves aside inside a running change: the target keeps
				// t until the ghost takes its place, and the old table is
				// a helper from now on (its later DROP stays off the target).
				d.tracker.StartOnline(ghostKey(to))
				cut++
				continue
			}
			real, kind, ok := d.ghostOf(from)
			if !ok || kind != toolKinds[d.cfg.OnlineDDL].ghost || !strings.EqualFold(real.Name, to.Name) || !strings.EqualFold(real.Schema, to.Schema) {
				other++
				continue
			}
			cut++
			alters, _ := d.tracker.TakeOnline(ghostKey(from))
			for _, a := range alters {
				stmts, err := d.tracker.Parse(a)
				if err != nil {
					return nil, true, fmt.Errorf("online schema change of %s: %w", real, err)
				}
				for _, st := range stmts {
					at, ok := st.(*ast.AlterTableStmt)
					if !ok {
						return nil, true, fmt.Errorf("online schema change of %s: %T recorded", real, st)
					}
					at.Table.Name = ast.NewCIStr(real.Name)
					at.Table.Schema = ast.NewCIStr(real.Schema)
					o, err := d.ddlStmt(def, at)
					if err != nil {
						return nil, true, err
					}
					outs = append(outs, o...)
				}
			}
		}
		switch {
		case cut == 0:
			return nil, false, nil
		case other > 0:
			return nil, true, fmt.Errorf("one RENAME TABLE is an online schema change's cut-over and renames other tables too")
		}
		return outs, true, nil
	}
	return nil, false, nil
}
