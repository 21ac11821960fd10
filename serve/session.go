package serve

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/server"
	"github.com/pingcap/tidb/pkg/parser"
)

// session is one client connection: the variables it set and its
// replica registration.
type session struct {
	s    *Server
	conn *server.Conn
	vars map[string]string // session user variables (@name), lower case
	// replicaID is the server id the replica registered (COM_REGISTER_SLAVE).
	replicaID uint32
	// db is the default database the client named (forwarded queries run in it).
	db string
	// fwd is the session's connection to the source (forward.go), and
	// parser classifies the statements that may go there.
	fwd    *client.Conn
	parser *parser.Parser
	// locked and inTxn: fwd holds a read lock or a transaction; without
	// either it is closed after each statement.
	locked, inTxn bool
}

func newSession(s *Server) *session { return &session{s: s, vars: map[string]string{}} }

// UseDB accepts any database: the service has none, and replicas only
// name one by accident (a default database in their connection). It is
// the default database of the queries forwarded to the source.
func (h *session) UseDB(db string) error {
	h.db = db
	if h.fwd != nil {
		return h.fwd.UseDB(db)
	}
	return nil
}

var (
	setAssign = regexp.MustCompile(`(?is)^\s*(@@session\.|@@global\.|@@local\.|@@|@)?([a-z_][a-z0-9_]*)\s*(=|:=)\s*(.*?)\s*$`)
	showVarRe = regexp.MustCompile(`(?is)^\s*show\s+(global\s+|session\s+)?variables(\s+like\s+'([^']*)')?\s*$`)
	selectRe  = regexp.MustCompile(`(?is)^\s*select\s+(.*?)\s*(limit\s+\d+\s*)?$`)
	// SET STATEMENT var=value[, ...] FOR query: MariaDB's per-statement
	// settings; its JDBC driver wraps every query that has a timeout so
	// (Debezium's do). The query is answered, the settings ignored.
	setStmtRe = regexp.MustCompile(`(?is)^\s*set\s+statement\s+.*?\s+for\s+(.+)$`)
	killRe    = regexp.MustCompile(`(?is)^\s*kill\s+(?:connection\s+)?(\d+)\s*$`)
	// A SELECT that reads a table (information_schema included) is not one
	// of variables: the service has no tables (FROM DUAL is no table).
	selectFromRe = regexp.MustCompile(`(?is)^\s*select\s.*?\sfrom\s+(?:dual\b)?`)
)

// HandleQuery answers what replicas and CDC clients ask at connect
// (slave.cc, go-mysql, Canal, Debezium, mariadb-binlog). With a source
// (Config.Source), the metadata queries of an allow-list go to it
// (forward.go). Anything else is refused with a one-line error: the
// service has no tables.
func (h *session) HandleQuery(q string) (*mysql.Result, error) {
	q = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(q), ";"))
	if m := setStmtRe.FindStringSubmatch(q); m != nil {
		return h.HandleQuery(m[1])
	}
	lq := strings.ToLower(q)
	switch {
	case strings.HasPrefix(lq, "set "):
		return nil, h.set(q[4:])
	case killRe.MatchString(q):
		// go-mysql's syncer ends its dump with KILL <its connection id>.
		id, _ := strconv.ParseUint(killRe.FindStringSubmatch(q)[1], 10, 32)
		if !h.s.kill(uint32(id)) {
			return nil, mysql.NewError(mysql.ER_NO_SUCH_THREAD, fmt.Sprintf("Unknown thread id: %d", id))
		}
		return nil, nil
	case showVarRe.MatchString(q) && h.s.cfg.Source == nil:
		m := showVarRe.FindStringSubmatch(q)
		if m[2] == "" { // no LIKE: all of them (Debezium reads them so)
			m[3] = "%"
		}
		return h.showVariables(m[3])
	case lq == "show master status", lq == "show binlog status", lq == "show binary log status":
		if h.fwd != nil {
			return h.masterStatusCaughtUp()
		}
		end := h.s.log.End()
		return resultset([]string{"File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB"},
			[][]any{{end.File, uint64(end.Pos), "", ""}})
	case lq == "show slave hosts", lq == "show replica hosts":
		return h.showReplicas()
	case showEventsRe.MatchString(q):
		return h.showEvents(showEventsRe.FindStringSubmatch(q))
	case lq == "show binary logs", lq == "show master logs":
		var rows [][]any
		for _, f := range h.s.log.Files() {
			rows = append(rows, []any{f, uint64(h.s.log.Size(f))})
		}
		return resultset([]string{"Log_name", "File_size"}, rows)
	case selectRe.MatchString(q) && !readsTable(q):
		return h.selectExprs(selectRe.FindStringSubmatch(q)[1])
	}
	switch kind := h.forwardKind(q); {
	case kind == fwdGrants || kind == fwdEnd && h.fwd == nil:
		return h.forward(q, kind) // answered by the service itself
	case kind == fwdVariables && h.s.cfg.Source == nil:
		return h.showVariablesWhere(q)
	case kind != fwdNone && h.s.cfg.Source != nil:
		return h.forward(q, kind)
	case kind != fwdNone && h.s.cfg.NoForward != "":
		return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, fmt.Sprintf("sluice serve does not forward %q to a source: %s", oneLine(q, 80), h.s.cfg.NoForward))
	case kind != fwdNone:
		return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, fmt.Sprintf("sluice serve answers replication queries only, not %q: it has no source to forward metadata queries to (fix: send it to the source server)", oneLine(q, 80)))
	}
	return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, fmt.Sprintf("sluice serve answers replication queries only, not %q (fix: send it to the source server)", oneLine(q, 80)))
}

// readsTable reports a SELECT ... FROM a table (outside quotes).
func readsTable(q string) bool {
	m := selectFromRe.FindString(stripQuoted(q))
	return m != "" && !strings.HasSuffix(strings.ToLower(strings.TrimSpace(m)), "dual")
}

// stripQuoted blanks the text of quoted strings, so that a FROM inside one
// is not taken for a clause.
func stripQuoted(q string) string {
	b := []byte(q)
	var quote byte
	for i, c := range b {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			b[i] = ' '
		case c == '\'' || c == '"' || c == '`':
			quote = c
		}
	}
	return string(b)
}

// set handles SET a=b[, c=d]: session variables are kept; anything else
// is accepted and ignored, as MaxScale's binlog router does.
func (h *session) set(expr string) error {
	for _, part := range splitTop(expr) {
		m := setAssign.FindStringSubmatch(part)
		if m == nil {
			continue // SET NAMES ..., SET autocommit=1 and the like
		}
		name, val := strings.ToLower(m[2]), h.eval(m[4])
		if m[1] == "@" {
			h.vars[name] = val
		}
		if name == "autocommit" && m[1] != "@" && m[1] != "@@global." && h.conn != nil {
			// Kept in the status the OK packets carry: JDBC drivers read
			// it, and Debezium will not take its snapshot's lock on a
			// connection that says it still commits every statement.
			switch strings.ToLower(val) {
			case "0", "off":
				h.conn.UnsetStatus(mysql.SERVER_STATUS_AUTOCOMMIT)
			case "1", "on":
				h.conn.SetStatus(mysql.SERVER_STATUS_AUTOCOMMIT)
			}
		}
	}
	return nil
}

// splitTop splits on commas outside quotes.
func splitTop(s string) []string {
	var out []string
	depth, quote, start := 0, byte(0), 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// eval gives the value of a SET's right-hand side or a SELECT expression.
func (h *session) eval(e string) string {
	e = strings.TrimSpace(e)
	le := strings.ToLower(e)
	switch {
	case len(e) >= 2 && (e[0] == '\'' || e[0] == '"') && e[len(e)-1] == e[0]:
		return e[1 : len(e)-1]
	case strings.HasPrefix(le, "@@"):
		v, _ := h.variable(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(le[2:], "global."), "session."), "local."))
		return v
	case strings.HasPrefix(le, "@"):
		return h.vars[le[1:]]
	case le == "unix_timestamp()":
		return strconv.FormatInt(time.Now().Unix(), 10)
	case le == "version()":
		return Version
	case le == "uuid()":
		return "sluice-serve"
	}
	return e
}

// variable is the service's value of a server variable.
func (h *session) variable(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "server_id":
		return strconv.FormatUint(uint64(h.s.cfg.ServerID), 10), true
	case "binlog_checksum":
		return "CRC32", true
	case "binlog_format":
		return "ROW", true
	case "binlog_row_image":
		return "FULL", true
	case "version":
		return Version, true
	case "version_comment":
		return "sluice binlog service", true
	case "gtid_domain_id":
		return "0", true
	case "gtid_strict_mode":
		return "0", true
	case "gtid_binlog_pos", "gtid_current_pos":
		g, err := h.s.log.GTIDPos()
		if err != nil {
			h.s.slog.Warn("serve: the GTID position at the relay's end", "err", err)
		}
		return g, true
	case "log_bin":
		return "ON", true
	case "rpl_semi_sync_master_enabled", "rpl_semi_sync_source_enabled":
		return "OFF", true
	case "max_allowed_packet":
		return "1073741824", true
	case "lower_case_table_names":
		return "0", true
	case "character_set_server", "character_set_database":
		return "utf8mb4", true
	case "collation_server":
		return "utf8mb4_general_ci", true
	case "time_zone", "system_time_zone":
		return "UTC", true
	}
	return "", false
}

// ownVariableNames are the variables the service answers itself, in the
// order SHOW VARIABLES lists them.
var ownVariableNames = []string{"server_id", "binlog_checksum", "binlog_format", "binlog_row_image", "version",
	"version_comment", "gtid_domain_id", "gtid_strict_mode", "gtid_binlog_pos", "gtid_current_pos", "log_bin",
	"rpl_semi_sync_master_enabled", "rpl_semi_sync_source_enabled", "max_allowed_packet", "lower_case_table_names",
	"character_set_server", "collation_server", "time_zone", "system_time_zone"}

func (h *session) showVariables(like string) (*mysql.Result, error) {
	var rows [][]any
	pat := strings.ToLower(like)
	for _, name := range ownVariableNames {
		if likeMatch(pat, name) {
			v, _ := h.variable(name)
			rows = append(rows, []any{name, v})
		}
	}
	return resultset([]string{"Variable_name", "Value"}, rows)
}

// likeMatch is SQL LIKE with % and _, case-insensitive.
func likeMatch(pat, s string) bool {
	re := "^" + strings.NewReplacer("%", ".*", "_", ".").Replace(regexp.QuoteMeta(pat)) + "$"
	re = strings.ReplaceAll(re, `\.\*`, ".*")
	ok, _ := regexp.MatchString("(?i)"+re, s)
	return ok
}

func (h *session) selectExprs(list string) (*mysql.Result, error) {
	var names []string
	var row []any
	for _, e := range splitTop(list) {
		e = strings.TrimSpace(e)
		name := e
		if i := strings.LastIndex(strings.ToLower(e), " as "); i > 0 {
			name, e = strings.Trim(strings.TrimSpace(e[i+4:]), "`'\""), strings.TrimSpace(e[:i])
		}
		names = append(names, name)
		le := strings.ToLower(e)
		if strings.HasPrefix(le, "@@") {
			v, ok := h.variable(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(le[2:], "global."), "session."), "local."))
			if !ok {
				return nil, mysql.NewError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, fmt.Sprintf("Unknown system variable '%s' (sluice serve knows the variables replicas ask for)", e[2:]))
			}
			row = append(row, v)
			continue
		}
		switch le {
		case "unix_timestamp()", "version()", "uuid()":
		default:
			if strings.Contains(le, "(") {
				// binlog_gtid_pos() and the like: a replica tolerates the
				// error, and guessing a value could mislead it.
				return nil, mysql.NewError(mysql.ER_SP_DOES_NOT_EXIST, fmt.Sprintf("FUNCTION %s does not exist in sluice serve", strings.SplitN(e, "(", 2)[0]))
			}
		}
		row = append(row, h.eval(e))
	}
	return resultset(names, [][]any{row})
}

func resultset(names []string, rows [][]any) (*mysql.Result, error) {
	if len(rows) == 0 {
		rs := &mysql.Resultset{Fields: make([]*mysql.Field, len(names)), FieldNames: map[string]int{}}
		for i, n := range names {
			rs.Fields[i] = &mysql.Field{Name: []byte(n), Type: mysql.MYSQL_TYPE_VAR_STRING, Charset: 33}
			rs.FieldNames[n] = i
		}
		return mysql.NewResult(rs), nil
	}
	rs, err := mysql.BuildSimpleTextResultset(names, rows)
	if err != nil {
		return nil, err
	}
	// go-mysql encodes an empty string as NULL; a server sends it as an
	// empty string (SHOW MASTER STATUS's Binlog_Do_DB, variables set to
	// ''), so the rows are encoded again with the two kept apart.
	for i, row := range rows {
		var b []byte
		for _, v := range row {
			t, err := mysql.FormatTextValue(v)
			switch {
			case err != nil:
				return nil, err
			case v == nil:
				b = append(b, 0xfb)
			default:
				b = append(b, mysql.PutLengthEncodedString(t)...)
			}
		}
		rs.RowDatas[i] = b
	}
	return mysql.NewResult(rs), nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// HandleFieldList: no tables.
func (h *session) HandleFieldList(table, _ string) ([]*mysql.Field, error) {
	return nil, mysql.NewError(mysql.ER_NO_SUCH_TABLE, "sluice serve has no tables")
}

// HandleStmtPrepare: no prepared statements.
func (h *session) HandleStmtPrepare(string) (int, int, any, error) {
	return 0, 0, nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, "sluice serve does not prepare statements")
}

// HandleStmtExecute: no prepared statements.
func (h *session) HandleStmtExecute(any, string, []any) (*mysql.Result, error) {
	return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, "sluice serve does not prepare statements")
}

// HandleStmtClose: no prepared statements.
func (h *session) HandleStmtClose(any) error { return nil }

// HandleOtherCommand takes the replication commands.
func (h *session) HandleOtherCommand(cmd byte, data []byte) error {
	switch cmd {
	case mysql.COM_REGISTER_SLAVE:
		if len(data) < 4 {
			return mysql.NewError(mysql.ER_MALFORMED_PACKET, "COM_REGISTER_SLAVE too short")
		}
		id := binary.LittleEndian.Uint32(data)
		if id == h.s.cfg.ServerID {
			return mysql.NewError(mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG,
				fmt.Sprintf("the replica's server_id %d is the binlog service's own (fix: give the replica or serve.server-id another server_id)", id))
		}
		h.replicaID = id
		h.s.register(h.conn.ConnectionID(), parseRegister(data))
		return nil
	case mysql.COM_BINLOG_DUMP:
		return h.dump(data)
	case mysql.COM_BINLOG_DUMP_GTID:
		return h.dumpGTID(data)
	}
	return mysql.NewError(mysql.ER_UNKNOWN_COM_ERROR, fmt.Sprintf("command %d is not supported by sluice serve", cmd))
}

// Replica is a registered replica (COM_REGISTER_SLAVE), for SHOW SLAVE HOSTS.
type Replica struct {
	ServerID uint32
	Host     string
	Port     uint16
}

// parseRegister reads COM_REGISTER_SLAVE: server_id(4), then host, user
// and password each with a one-byte length, port(2), rank(4), master_id(4).
func parseRegister(b []byte) Replica {
	r := Replica{ServerID: binary.LittleEndian.Uint32(b)}
	b = b[4:]
	str := func() string {
		if len(b) == 0 || int(b[0]) >= len(b) {
			b = nil
			return ""
		}
		s := string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
		return s
	}
	r.Host = str()
	str() // user
	str() // password: never kept
	if len(b) >= 2 {
		r.Port = binary.LittleEndian.Uint16(b)
	}
	return r
}

// showReplicas is SHOW SLAVE HOSTS: MariaDB's four columns for each
// registered replica, then what the service measures of its dump (empty
// while it has none): position sent, lag, counts and DT percentiles.
func (h *session) showReplicas() (*mysql.Result, error) {
	dumps := map[uint32]DumpStats{}
	for _, d := range h.s.Stats() {
		dumps[d.ConnID] = d
	}
	regs := h.s.replicas()
	ids := make([]uint32, 0, len(regs))
	for id := range regs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var rows [][]any
	for _, id := range ids {
		r := regs[id]
		row := []any{uint64(r.ServerID), r.Host, uint64(r.Port), uint64(h.s.cfg.ServerID)}
		if d, ok := dumps[id]; ok {
			row = append(row, d.File, uint64(d.Pos), d.LagSeconds, d.Events, d.Bytes, d.Txns, d.DelayP50Ms, d.DelayP99Ms)
		} else {
			row = append(row, "", nil, nil, nil, nil, nil, nil, nil)
		}
		rows = append(rows, row)
	}
	return resultset([]string{"Server_id", "Host", "Port", "Master_id",
		"Binlog_file", "Binlog_pos", "Lag_seconds", "Events_sent", "Bytes_sent", "Transactions_sent", "Delay_p50_ms", "Delay_p99_ms"}, rows)
}
