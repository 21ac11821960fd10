package decode

import (
	"encoding/binary"

	"github.com/sluice-db/sluice"
)

// sql_mode bits that change how a statement's text reads (MariaDB's
// MODE_ANSI_QUOTES and MODE_NO_BACKSLASH_ESCAPES; MySQL uses the same).
const (
	modeANSIQuotes         = 1 << 2
	modeNoBackslashEscapes = 1 << 20
)

// Bits of Q_FLAGS2_CODE: OPTION_NO_FOREIGN_KEY_CHECKS, and MariaDB's
// explicit_defaults_for_timestamp (seen set when the session's variable is
// 1 and clear when it is 0, MariaDB 10.11).
const (
	optionNoFKChecks       = 1 << 26
	optionExplicitDefTimes = 1 << 24
)

// ddlText is the decoder's state for sending DDL as the source's text.
type ddlText struct {
	// session is the current Query event's session context.
	session sluice.DDLSession
	// src is the text of the statement being decoded, when it is one
	// statement and can go to the target as written.
	src sourceStmt
	// sent: the last restoreRouted returned the source's text.
	sent bool
	// ddlSame: the DDL may leave its table's definition as it was
	// (StreamItem.SameShape).
	ddlSame bool
}

type sourceStmt struct {
	text                    string
	ansiQuotes, noBackslash bool
}

// querySession reads a Query event's status variables: the session
// context a native replica sets before it runs the statement (MariaDB's
// Query_log_event::do_apply_event: sql_mode, the character sets,
// time_zone, auto_increment_increment and _offset, the foreign_key_checks
// and explicit_defaults_for_timestamp flags).
func querySession(vars []byte) sluice.DDLSession {
	var s sluice.DDLSession
	walkStatusVars(vars, func(code byte, v []byte) {
		switch code {
		case 0: // Q_FLAGS2_CODE
			f := binary.LittleEndian.Uint32(v)
			s.NoFKChecks, s.ExplicitTimestamp, s.HasFlags = f&optionNoFKChecks != 0, f&optionExplicitDefTimes != 0, true
		case 1: // Q_SQL_MODE_CODE
			s.SQLMode, s.HasSQLMode = binary.LittleEndian.Uint64(v), true
		case 3: // Q_AUTO_INCREMENT
			s.AutoIncIncrement, s.AutoIncOffset = binary.LittleEndian.Uint16(v), binary.LittleEndian.Uint16(v[2:])
		case 4: // Q_CHARSET_CODE
			for i := range s.Charset {
				s.Charset[i] = binary.LittleEndian.Uint16(v[2*i:])
			}
		case 5: // Q_TIME_ZONE_CODE
			s.TimeZone = string(v[1:])
		}
	})
	return s
}
