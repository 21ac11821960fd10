package binlog

import (
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-db/sluice"
)

// reconnectNote is the line the reader logs once it is connected again.
// It names a possible duplicate server-id only when the lost connection
// says so: MariaDB kills the older of two binlog dumps with one server id
// (ER_CONNECTION_KILLED, 1927), and MySQL refuses it with a message that
// names the server id or uuid. A planned restart ends the connection with
// EOF or a shutdown error (1053), and must not send the user hunting for
// another replica.
func reconnectNote(next sluice.Position, attempts, total int, serverID uint32, lost error) string {
	s := fmt.Sprintf("binlog: reconnected to the source at %s after %d attempt(s) (%d reconnects so far)", next, attempts, total)
	if duplicateServerID(lost) {
		s += fmt.Sprintf("; the source ended the connection as it does when another replica connects with server-id %d: if this repeats, set incremental.server-id to an id nothing else uses", serverID)
	}
	return s
}

// duplicateServerID reports whether err is the source ending a binlog
// dump because another one uses the same server id.
func duplicateServerID(err error) bool {
	if err == nil {
		return false
	}
	var me *gomysql.MyError
	if errors.As(err, &me) && me.Code == 1927 {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "same server_id") || strings.Contains(msg, "same server_uuid") || strings.Contains(msg, "same server id")
}
