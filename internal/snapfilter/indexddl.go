package snapfilter

import (
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions the parser may meet
)

// indexOnly reports whether a DDL statement only adds, drops or renames
// secondary indexes that cannot reject a row: it changes no row, so a
// table copied partly before and partly after it is right once the
// statement runs on it (issue 29: an ADD INDEX while an interrupted copy
// was stopped made every restart refuse). A UNIQUE index is not one: on a
// target that holds rows of two snapshots, adding it could meet a pair of
// rows the source never held together. A statement the parser cannot read
// is not one either: the caller then refuses it as before.
func indexOnly(sql string) bool {
	stmts, _, err := parser.New().Parse(sql, "", "")
	if err != nil || len(stmts) != 1 {
		return false
	}
	switch s := stmts[0].(type) {
	case *ast.CreateIndexStmt:
		return s.KeyType == ast.IndexKeyTypeNone || s.KeyType == ast.IndexKeyTypeFulltext || s.KeyType == ast.IndexKeyTypeSpatial
	case *ast.DropIndexStmt:
		return !s.IsHypo
	case *ast.AlterTableStmt:
		index := false
		for _, spec := range s.Specs {
			switch spec.Tp {
			case ast.AlterTableAddConstraint:
				c := spec.Constraint
				if c == nil || c.Tp != ast.ConstraintIndex && c.Tp != ast.ConstraintKey && c.Tp != ast.ConstraintFulltext {
					return false
				}
				index = true
			case ast.AlterTableDropIndex, ast.AlterTableRenameIndex, ast.AlterTableIndexInvisible:
				index = true
			case ast.AlterTableAlgorithm, ast.AlterTableLock:
			default:
				return false
			}
		}
		return index
	}
	return false
}
