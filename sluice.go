// Package sluice holds the domain types shared by every stage of the data path:
// endpoints, positions, tables, row changes and transactions, plus the error
// type that carries a hint for the user. Stage packages import this package,
// never each other.
package sluice

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Endpoint is how to reach one MySQL-family server.
type Endpoint struct {
	Host     string `yaml:"host" json:"host"`
	Port     int    `yaml:"port" json:"port"`
	User     string `yaml:"user" json:"user"`
	Password string `yaml:"password" json:"-"`
	// Socket is a unix socket path of a local server; when set it is used
	// instead of host and port.
	Socket string `yaml:"socket,omitempty" json:"socket,omitempty"`
	// TLS says how connections to this server are encrypted.
	TLS TLS `yaml:"tls,omitempty" json:"tls,omitempty"`
	// SessionServerID, when not zero, is set as the session's server_id on
	// every connection: a task whose target is its source marks its own
	// writes with it, so that its binlog reader knows them and does not
	// replicate them again (a native replica's replicate_same_server_id=0).
	// Never read from a task file.
	SessionServerID uint32 `yaml:"-" json:"-"`
}

// TLS is an endpoint's TLS settings, as the MySQL client's --ssl-mode and
// --ssl-ca/--ssl-cert/--ssl-key: Mode is "disabled", "preferred" (the
// default: encrypt when the server can, verify nothing), "required"
// (encrypt, verify nothing), "verify-ca" (the server's certificate chains
// to CA) or "verify-identity" (and names the host). CA, Cert and Key are
// PEM files; Cert and Key make a client certificate.
type TLS struct {
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	CA   string `yaml:"ca,omitempty" json:"ca,omitempty"`
	Cert string `yaml:"cert,omitempty" json:"cert,omitempty"`
	Key  string `yaml:"key,omitempty" json:"key,omitempty"`
}

// Addr is host:port, for messages. It never contains the password.
func (e Endpoint) Addr() string { return fmt.Sprintf("%s:%d", e.Host, e.Port) }

// String never prints the password, so an Endpoint is safe to log.
func (e Endpoint) String() string { return fmt.Sprintf("%s@%s", e.User, e.Addr()) }

// Position is a point in a source's binlog: file/offset and, when the source
// uses GTIDs, the executed GTID set at that point (flavour-specific text form).
type Position struct {
	File    string `json:"file" yaml:"file"`
	Pos     uint32 `json:"pos" yaml:"pos"`
	GTIDSet string `json:"gtid_set,omitempty" yaml:"gtid-set,omitempty"`
	Flavor  string `json:"flavor,omitempty" yaml:"flavor,omitempty"` // "mariadb" or "mysql"
}

func (p Position) String() string {
	s := fmt.Sprintf("%s:%d", p.File, p.Pos)
	if p.GTIDSet != "" {
		s += " gtid=" + p.GTIDSet
	}
	return s
}

// Compare orders two positions of one binlog sequence: -1 when p is before
// q, 0 when equal, +1 when after. Files are ordered by the number after the
// last dot of the name, not as text: mysql-bin.999999 comes before
// mysql-bin.1000000 (the server widens the suffix past six digits). Within a
// file the offset decides. GTID sets are not consulted.
//
// A position with no file is before every position with one (an empty
// checkpoint is the start). Positions of different sequences (other base
// names, or a name without a numeric suffix) have no true order; Compare
// then orders them by the file name as text so that it stays a total order,
// and a caller that may see two sequences must check SameSequence first.
func (p Position) Compare(q Position) int {
	switch {
	case p.File == q.File:
		return cmpUint(uint64(p.Pos), uint64(q.Pos))
	case p.File == "":
		return -1
	case q.File == "":
		return 1
	}
	pb, pn, pok := splitBinlogName(p.File)
	qb, qn, qok := splitBinlogName(q.File)
	if !pok || !qok || pb != qb {
		return strings.Compare(p.File, q.File)
	}
	if c := cmpUint(pn, qn); c != 0 {
		return c
	}
	// Same number written with other zero padding (000010 vs 10): one file.
	return cmpUint(uint64(p.Pos), uint64(q.Pos))
}

// SameSequence reports whether both positions name files of one binlog
// sequence (same base name, numeric suffixes), so that Compare is meaningful.
// An empty file belongs to every sequence.
func (p Position) SameSequence(q Position) bool {
	if p.File == "" || q.File == "" {
		return true
	}
	pb, _, pok := splitBinlogName(p.File)
	qb, _, qok := splitBinlogName(q.File)
	return pok && qok && pb == qb
}

// splitBinlogName splits "mysql-bin.000012" into ("mysql-bin", 12, true).
func splitBinlogName(f string) (string, uint64, bool) {
	i := strings.LastIndexByte(f, '.')
	if i < 0 || i == len(f)-1 {
		return f, 0, false
	}
	n, err := strconv.ParseUint(f[i+1:], 10, 64)
	if err != nil {
		return f, 0, false
	}
	return f[:i], n, true
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TableRef names a table.
type TableRef struct {
	Schema string `json:"schema" yaml:"schema"`
	Name   string `json:"name" yaml:"name"`
}

func (t TableRef) String() string { return t.Schema + "." + t.Name }

// Quoted is the backtick-quoted `schema`.`name`.
func (t TableRef) Quoted() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

// QuoteIdent quotes a MySQL identifier with backticks.
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Column describes one column of a table as the source defines it.
type Column struct {
	Name      string `json:"name"`
	DataType  string `json:"data_type"`   // information_schema DATA_TYPE, lower case: int, varchar, bit...
	FullType  string `json:"column_type"` // COLUMN_TYPE: "int(10) unsigned", "enum('a','b')"
	Nullable  bool   `json:"nullable"`
	Unsigned  bool   `json:"unsigned"`
	Charset   string `json:"charset,omitempty"`
	Generated bool   `json:"generated"` // virtual or stored generated: never written
	// For the Kafka sink's schema change events (Debezium's tableChanges);
	// replication does not use them.
	AutoIncrement bool    `json:"auto_increment,omitempty"`
	Default       *string `json:"default,omitempty"` // the DEFAULT expression, a string literal unquoted; nil: none, or NULL
	Comment       string  `json:"comment,omitempty"`
}

// Table is a table's shape: columns in ordinal order and its keys.
type Table struct {
	Ref     TableRef `json:"ref"`
	Columns []Column `json:"columns"`
	// PK holds the column indexes of the primary key, or of the first NOT NULL
	// unique key when there is no primary key; empty when the table has neither.
	PK []int `json:"pk"`
	// PKIsPrimary says whether PK is a real PRIMARY KEY (false: a NOT NULL unique key).
	PKIsPrimary bool `json:"pk_is_primary"`
	// UniqueKeys holds every unique key (primary included) as column indexes;
	// the replication scheduler builds writesets from them.
	UniqueKeys [][]int `json:"unique_keys"`
	// UniqueKeyNames names each of UniqueKeys ("PRIMARY" for the primary
	// key), when known, so that a later DROP INDEX finds it.
	UniqueKeyNames []string `json:"unique_key_names,omitempty"`
	CreateSQL      string   `json:"create_sql,omitempty"`
}

// HasKey reports whether rows can be identified by a key.
func (t *Table) HasKey() bool { return len(t.PK) > 0 }

// ColumnIndex returns the index of the named column (case-insensitive), or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// WritableColumns are the columns that take values on insert (not generated).
func (t *Table) WritableColumns() []int {
	out := make([]int, 0, len(t.Columns))
	for i, c := range t.Columns {
		if !c.Generated {
			out = append(out, i)
		}
	}
	return out
}

// ChangeKind is the kind of a row change.
type ChangeKind uint8

const (
	Insert ChangeKind = iota + 1
	Update
	Delete
)

func (k ChangeKind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// RowChange is one row's change. Before is set for Update and Delete, After
// for Insert and Update; values are in column order of Table.
type RowChange struct {
	Kind ChangeKind
	// NoFKChecks: the source session ran with foreign_key_checks=0 (the
	// rows event's NO_FOREIGN_KEY_CHECKS flag), so the source neither
	// checked nor cascaded this change's foreign keys, and a replica
	// applies it the same way.
	NoFKChecks bool
	Table      *Table
	Before     []any
	After      []any
}

// Txn is one source transaction, in source commit order.
type Txn struct {
	GTID    string   // the transaction's GTID, when the source has one
	End     Position // the position just after the transaction's commit event
	Changes []RowChange
	DDL     string // set for a DDL transaction (then Changes is empty)
	Schema  string // default schema of a DDL statement
	// Timestamp is the source commit time in unix seconds, for lag.
	Timestamp uint32
}

// Sentinel errors. Wrap them with %w; test with errors.Is.
var (
	ErrUnreachable     = errors.New("server unreachable")
	ErrAccessDenied    = errors.New("access denied")
	ErrPrivilege       = errors.New("missing privilege")
	ErrUnknownTable    = errors.New("unknown table")
	ErrConfig          = errors.New("invalid configuration")
	ErrSchemaMismatch  = errors.New("target table definition differs")
	ErrDiskFull        = errors.New("disk full")
	ErrBinlogFormat    = errors.New("unsupported binlog settings")
	ErrBinlogPurged    = errors.New("binlog purged")
	ErrUnsupportedDDL  = errors.New("unsupported DDL")
	ErrNoKey           = errors.New("table has no key")
	ErrVerifyDifferent = errors.New("source and target differ")
	// ErrNotRunning: sluice status found the task failed or its process
	// gone (exit 3, for health checks).
	ErrNotRunning = errors.New("not running")
)

// Version and Commit name the build; make build sets them at link time
// (-X github.com/sluice-db/sluice.Version=...), for sluice version and the
// sluice_build_info metric.
var (
	Version = "dev"
	Commit  = ""
)

// Error is an error the user can act on: what failed, why, and how to fix it.
// Error() is always one line.
type Error struct {
	Op   string // what was being done: "connect to source 127.0.0.1:3306"
	Err  error  // the cause, often wrapping a sentinel
	Hint string // how to fix it
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	inner := ""
	if e.Err != nil {
		inner = e.Err.Error()
		b.WriteString(inner)
	}
	// One fix per line: a cause that names its own fix is the more precise
	// one (an outer hint is often generic), so the outer is left out.
	if e.Hint != "" && !strings.Contains(inner, "(fix: ") {
		b.WriteString(" (fix: ")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\n", " ")), " ")
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a hint.
func Errorf(sentinel error, op, hint, format string, args ...any) *Error {
	var err error
	if format == "" {
		err = sentinel
	} else {
		err = fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	}
	return &Error{Op: op, Err: err, Hint: hint}
}
