package serve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// errWhere is a SHOW VARIABLES WHERE condition the service cannot evaluate.
var errWhere = errors.New("unsupported condition")

// showVariablesWhere answers SHOW [GLOBAL|SESSION] VARIABLES WHERE cond
// from the service's own variables, when there is no source to forward it
// to (or it cannot be reached). cond may test Variable_name with =, IN and
// LIKE, joined by AND, OR and NOT: the forms clients send (Debezium's
// WHERE Variable_name IN (...)).
func (h *session) showVariablesWhere(q string) (*mysql.Result, error) {
	if h.parser == nil {
		h.parser = parser.New()
	}
	stmts, _, err := h.parser.Parse(q, "", "")
	if err != nil || len(stmts) != 1 {
		return nil, mysql.NewError(mysql.ER_PARSE_ERROR, fmt.Sprintf("sluice serve cannot parse %q", oneLine(q, 80)))
	}
	show, ok := stmts[0].(*ast.ShowStmt)
	if !ok || show.Tp != ast.ShowVariables {
		return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, fmt.Sprintf("not SHOW VARIABLES: %q", oneLine(q, 80)))
	}
	var rows [][]any
	for _, name := range ownVariableNames {
		ok := true
		switch {
		case show.Where != nil:
			ok, err = nameMatches(show.Where, name)
		case show.Pattern != nil:
			ok, err = nameMatches(show.Pattern, name)
		}
		if err != nil {
			return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, fmt.Sprintf("sluice serve answers SHOW VARIABLES WHERE on Variable_name only (=, IN, LIKE, AND, OR, NOT), not %q (fix: send it to the source server)", oneLine(q, 100)))
		}
		if ok {
			v, _ := h.variable(name)
			rows = append(rows, []any{name, v})
		}
	}
	return resultset([]string{"Variable_name", "Value"}, rows)
}

// nameMatches evaluates cond for the variable name.
func nameMatches(cond ast.ExprNode, name string) (bool, error) {
	switch x := cond.(type) {
	case *ast.ParenthesesExpr:
		return nameMatches(x.Expr, name)
	case *ast.UnaryOperationExpr:
		if x.Op != opcode.Not && x.Op != opcode.Not2 {
			return false, errWhere
		}
		ok, err := nameMatches(x.V, name)
		return !ok, err
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, err := nameMatches(x.L, name)
			if err != nil {
				return false, err
			}
			r, err := nameMatches(x.R, name)
			if x.Op == opcode.LogicAnd {
				return l && r, err
			}
			return l || r, err
		case opcode.EQ:
			if !isNameColumn(x.L) {
				return false, errWhere
			}
			s, ok := x.R.(ast.ValueExpr)
			if !ok {
				return false, errWhere
			}
			return strings.EqualFold(s.GetString(), name), nil
		}
	case *ast.PatternInExpr:
		if !isNameColumn(x.Expr) || x.Sel != nil {
			return false, errWhere
		}
		in := false
		for _, e := range x.List {
			s, ok := e.(ast.ValueExpr)
			if !ok {
				return false, errWhere
			}
			in = in || strings.EqualFold(s.GetString(), name)
		}
		return in != x.Not, nil
	case *ast.PatternLikeOrIlikeExpr:
		// SHOW VARIABLES LIKE 'p' has no column: it tests the name.
		if x.Expr != nil && !isNameColumn(x.Expr) {
			return false, errWhere
		}
		p, ok := x.Pattern.(ast.ValueExpr)
		if !ok {
			return false, errWhere
		}
		return likeMatch(p.GetString(), name) != x.Not, nil
	}
	return false, errWhere
}

func isNameColumn(e ast.ExprNode) bool {
	c, ok := e.(*ast.ColumnNameExpr)
	return ok && c.Name.Name.L == "variable_name"
}
