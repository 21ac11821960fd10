package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literals in the statements parsed

	"github.com/sluice-db/sluice"
)

// Source lets the service answer the metadata queries only a real server
// can (SHOW DATABASES, SHOW CREATE TABLE, information_schema, ...), which
// CDC clients send for their schema snapshot (Debezium's snapshot.mode
// no_data, when_needed, initial): each session that sends one gets a
// connection of its own to the source, opened by Dial with sluice's source
// credentials, and the source's answer is relayed as it is (columns with
// their types, rows, NULLs, errors). Only the statements of an allow-list
// are forwarded (forwardKind); nothing that writes, and no SELECT of a
// user table.
type Source struct {
	// Dial opens a connection to the source.
	Dial func(ctx context.Context) (*client.Conn, error)
	// CatchUp bounds how long SHOW MASTER STATUS, in a session that read
	// metadata from the source, waits for the relay to reach the source's
	// position (default one minute).
	CatchUp time.Duration
}

// forward kinds of a statement.
const (
	fwdNone      = iota // not forwarded: refused
	fwdMeta             // read-only metadata: run on the source, answer relayed
	fwdVariables        // SHOW VARIABLES: the source's, with the service's own replacing theirs
	fwdLock             // FLUSH TABLES ... WITH READ LOCK, START TRANSACTION: on the session's source connection
	fwdEnd              // UNLOCK TABLES, COMMIT, ROLLBACK: on that connection if it has one, else nothing to end
	fwdGrants           // SHOW GRANTS: the service's own grants
)

// metaShows are the SHOW statements forwarded as they are.
var metaShows = map[ast.ShowStmtType]bool{
	ast.ShowDatabases: true, ast.ShowTables: true, ast.ShowTableStatus: true, ast.ShowColumns: true,
	ast.ShowIndex: true, ast.ShowCreateTable: true, ast.ShowCreateDatabase: true, ast.ShowCreateView: true,
	ast.ShowCharset: true, ast.ShowCollation: true, ast.ShowEngines: true, ast.ShowTriggers: true,
}

// schemaFuncs are the functions a forwarded SELECT may call: none that
// sleeps, locks, reads files or writes, and no stored function (a stored
// function is called by an unqualified name too, so only these names pass).
// schemaTables are the information_schema tables a client may read through
// the service: those that describe schemas. The rest are refused, above all
// the ones that show other sessions' statement text (PROCESSLIST,
// INNODB_TRX, QUERY_CACHE_INFO: a CREATE USER's password among them) or
// privileges, which the source's credentials would otherwise hand to every
// user of the service.
var schemaTables = map[string]bool{
	"schemata": true, "tables": true, "columns": true, "statistics": true, "key_column_usage": true,
	"table_constraints": true, "referential_constraints": true, "check_constraints": true, "views": true,
	"triggers": true, "routines": true, "parameters": true, "partitions": true, "events": true,
	"character_sets": true, "collations": true, "collation_character_set_applicability": true,
	"engines": true, "keywords": true, "sql_functions": true,
}

var schemaFuncs = map[string]bool{
	"concat": true, "concat_ws": true, "lower": true, "upper": true, "ifnull": true, "coalesce": true,
	"if": true, "length": true, "char_length": true, "substring": true, "substr": true, "trim": true,
	"replace": true, "database": true, "schema": true, "nullif": true, "cast": true, "convert": true,
	"find_in_set": true, "left": true, "right": true, "locate": true, "instr": true,
	// comparison and logic, which the parser names as functions
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "nulleq": true,
	"and": true, "or": true, "not": true, "xor": true, "in": true, "like": true, "isnull": true,
	"istrue": true, "isfalse": true, "plus": true, "minus": true, "mul": true, "div": true, "unaryminus": true,
}

// forwardKind classifies a statement by its syntax tree (TiDB's parser):
// anything it cannot parse, or that is not on the allow-list, is fwdNone.
func (h *session) forwardKind(q string) int {
	if h.parser == nil {
		h.parser = parser.New()
	}
	stmts, _, err := h.parser.Parse(q, "", "")
	if err != nil || len(stmts) != 1 {
		return fwdNone
	}
	switch s := stmts[0].(type) {
	case *ast.ShowStmt:
		switch {
		case metaShows[s.Tp]:
			return fwdMeta
		case s.Tp == ast.ShowVariables:
			return fwdVariables
		case s.Tp == ast.ShowGrants:
			return fwdGrants
		}
	case *ast.SelectStmt, *ast.SetOprStmt:
		if h.schemaOnly(stmts[0]) {
			return fwdMeta
		}
	case *ast.FlushStmt:
		if s.Tp == ast.FlushTables && s.ReadLock {
			return fwdLock
		}
	case *ast.BeginStmt:
		if s.AsOf == nil {
			return fwdLock
		}
	case *ast.UnlockTablesStmt, *ast.CommitStmt, *ast.RollbackStmt:
		return fwdEnd
	}
	return fwdNone
}

// schemaOnly reports a SELECT (or UNION) that reads information_schema
// tables only, calls only schemaFuncs, and neither locks nor writes.
type schemaOnlyVisitor struct {
	db string // the session's default database
	ok bool
}

func (v *schemaOnlyVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SelectStmt:
		if x.SelectIntoOpt != nil || (x.LockInfo != nil && x.LockInfo.LockType != ast.SelectLockNone) || x.Kind != ast.SelectStmtKindSelect {
			v.ok = false
		}
	case *ast.TableName:
		schema := x.Schema.L
		if schema == "" {
			schema = strings.ToLower(v.db)
		}
		if schema != "information_schema" || !schemaTables[x.Name.L] {
			v.ok = false
		}
	case *ast.FuncCallExpr:
		if x.Schema.L != "" || !schemaFuncs[x.FnName.L] {
			v.ok = false
		}
	case *ast.BinaryOperationExpr, *ast.UnaryOperationExpr, *ast.PatternLikeOrIlikeExpr, *ast.PatternInExpr,
		*ast.IsNullExpr, *ast.IsTruthExpr, *ast.BetweenExpr, *ast.ParenthesesExpr, *ast.ColumnNameExpr,
		*ast.ColumnName, *ast.FieldList, *ast.SelectField, *ast.TableRefsClause, *ast.Join, *ast.TableSource,
		*ast.OnCondition, *ast.ByItem, *ast.OrderByClause, *ast.GroupByClause, *ast.HavingClause, *ast.Limit,
		*ast.SetOprStmt, *ast.SetOprSelectList, *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr,
		*ast.AggregateFuncExpr, *ast.CaseExpr, *ast.WhenClause, *ast.FuncCastExpr, *ast.DefaultExpr:
	case ast.ValueExpr:
	default:
		v.ok = false // anything else (variables, window functions, ...) is not needed for metadata
	}
	return n, !v.ok
}

func (v *schemaOnlyVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

func (h *session) schemaOnly(n ast.Node) bool {
	v := &schemaOnlyVisitor{db: h.db, ok: true}
	n.Accept(v)
	return v.ok
}

// source returns the session's connection to the source, opening it.
func (h *session) source() (*client.Conn, error) {
	if h.fwd != nil {
		return h.fwd, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := h.s.cfg.Source.Dial(ctx)
	if err != nil {
		h.s.slog.Warn("serve: connect to the source for a metadata query", "err", err)
		return nil, mysql.NewError(mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE, "sluice serve cannot reach its source to answer this metadata query: "+oneLine(err.Error(), 200)+" (fix: check the task's source: and that the source is up)")
	}
	// A read-only session: the allow-list already keeps writes out; this
	// makes the source refuse one should anything slip through.
	if _, err := c.Execute("SET SESSION TRANSACTION READ ONLY"); err != nil {
		c.Close()
		return nil, err
	}
	if h.db != "" {
		if err := c.UseDB(h.db); err != nil {
			c.Close()
			return nil, err
		}
	}
	h.fwd = c
	return c, nil
}

// forward answers q of a forwarded kind (forwardKind).
func (h *session) forward(q string, kind int) (*mysql.Result, error) {
	switch kind {
	case fwdGrants:
		return h.showGrants()
	case fwdEnd:
		if h.fwd == nil {
			return nil, nil // nothing locked, no transaction: nothing to end
		}
	}
	c, err := h.source()
	if err != nil {
		if kind == fwdVariables {
			// The source is down: the variables a replica or Debezium's
			// streaming asks for are the service's anyway, and serving
			// while the source is away is what the service is for.
			return h.showVariablesWhere(q)
		}
		return nil, err
	}
	r, err := c.Execute(q)
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return nil, me // the source's own error, as the client would get it
		}
		// The connection broke: the next query opens a new one. A lock or
		// transaction it held is gone, so say so rather than go on.
		h.closeSource()
		return nil, mysql.NewError(mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE, "sluice serve lost its connection to the source while forwarding a metadata query (a lock or transaction on it ended): "+oneLine(err.Error(), 200))
	}
	if kind == fwdVariables {
		if !h.locked && !h.inTxn {
			h.closeSource()
		}
		return h.mergeVariables(r)
	}
	// The session's status flags are the service's (go-mysql adds them to
	// every answer), not those of its own connection to the source; only
	// a transaction opened or ended there shows.
	r.Status = 0
	lq := strings.ToLower(strings.TrimSpace(q))
	switch {
	case kind == fwdLock && (strings.HasPrefix(lq, "start") || strings.HasPrefix(lq, "begin")):
		h.inTxn = true
		h.conn.SetStatus(mysql.SERVER_STATUS_IN_TRANS)
	case kind == fwdLock:
		h.locked = true
	case kind == fwdEnd && strings.HasPrefix(lq, "unlock"):
		h.locked = false
	case kind == fwdEnd:
		h.inTxn = false
		h.conn.UnsetStatus(mysql.SERVER_STATUS_IN_TRANS)
	}
	if !h.locked && !h.inTxn {
		// Nothing held on the source: no idle connection stays open there
		// for each replica or client that once asked for its variables.
		h.closeSource()
	}
	return r, nil
}

// ownVariables are the variables whose value is the service's, not the
// source's: they describe the binlog the service serves.
var ownVariables = map[string]bool{
	"server_id": true, "binlog_checksum": true, "binlog_format": true, "binlog_row_image": true,
	"version": true, "version_comment": true, "gtid_domain_id": true, "gtid_strict_mode": true,
	"gtid_binlog_pos": true, "gtid_current_pos": true, "log_bin": true,
	"rpl_semi_sync_master_enabled": true, "rpl_semi_sync_source_enabled": true, "max_allowed_packet": true,
}

// mergeVariables replaces, in the source's SHOW VARIABLES, the values of
// the service's own variables with the service's.
func (h *session) mergeVariables(r *mysql.Result) (*mysql.Result, error) {
	if r.Resultset == nil || len(r.Fields) != 2 {
		return r, nil
	}
	var rows [][]any
	for i := range r.RowDatas {
		vals, err := r.RowDatas[i].Parse(r.Fields, false, nil)
		if err != nil {
			return nil, err
		}
		name := string(vals[0].AsString())
		var v any
		if vals[1].Type != mysql.FieldValueTypeNull {
			v = string(vals[1].AsString())
		}
		if ownVariables[strings.ToLower(name)] {
			v, _ = h.variable(name)
		}
		rows = append(rows, []any{name, v})
	}
	return resultset([]string{"Variable_name", "Value"}, rows)
}

// showGrants answers SHOW GRANTS with what the service lets its users do:
// read the binlog, and, with a source, read its metadata (forwarded) and
// take the global read lock a schema snapshot takes (FLUSH TABLES WITH
// READ LOCK, forwarded). It grants no SELECT: user tables are not served.
func (h *session) showGrants() (*mysql.Result, error) {
	privs := "REPLICATION SLAVE, REPLICATION CLIENT"
	if h.s.cfg.Source != nil {
		privs = "RELOAD, SHOW DATABASES, LOCK TABLES, " + privs
	}
	user := h.conn.GetUser()
	return resultset([]string{"Grants for " + user + "@%"}, [][]any{{"GRANT " + privs + " ON *.* TO `" + user + "`@`%`"}})
}

// masterStatusCaughtUp is the relay's end once it holds the source's
// position, for SHOW MASTER STATUS in a session that holds a lock or a
// transaction on the source: the schema it reads there is the source's at
// that position (under the FLUSH TABLES WITH READ LOCK Debezium takes,
// exactly), so the position given with it must not be an older one of
// the relay's.
func (h *session) masterStatusCaughtUp() (*mysql.Result, error) {
	r, err := h.fwd.Execute("SHOW MASTER STATUS")
	if err != nil {
		return nil, err
	}
	if len(r.RowDatas) == 0 {
		return nil, mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, "the source answers SHOW MASTER STATUS with no row: its binary log is off")
	}
	file, _ := r.GetString(0, 0)
	pos, _ := r.GetUint(0, 1)
	want := sluice.Position{File: file, Pos: uint32(pos)}
	wait := h.s.cfg.Source.CatchUp
	if wait <= 0 {
		wait = time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		end := h.s.log.End()
		if end.Compare(want) >= 0 {
			return resultset([]string{"File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB"},
				[][]any{{end.File, uint64(end.Pos), "", ""}})
		}
		if time.Now().After(deadline) {
			return nil, mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG, fmt.Sprintf("sluice serve's relay is at %s:%d, behind the source's %s:%d that the metadata read from the source matches, after %s (fix: check that the task fetches the source's binlog; then retry)", end.File, end.Pos, file, pos, wait))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closeSource ends the session's source connection, if any (and with it
// a lock or transaction it held).
func (h *session) closeSource() {
	if h.fwd != nil {
		h.fwd.Close()
		h.fwd = nil
	}
	h.locked, h.inTxn = false, false
}
