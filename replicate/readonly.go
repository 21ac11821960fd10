package replicate

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// targetReadOnly reports whether err is the target refusing a write
// because it is read-only: SET GLOBAL read_only=1 during a switchover, a
// replica promoted late, a server started with --read-only (1290
// ER_OPTION_PREVENTS_STATEMENT names the option; 1836 ER_READ_ONLY_MODE).
// It is a state of the server that an operator ends, so the applier waits
// for it with backoff instead of stopping the task, and resumes from its
// checkpoint once the target takes writes again.
func targetReadOnly(err error) bool {
	if err == nil {
		return false
	}
	if strings.Contains(err.Error(), "the server is read-only (read_only=ON)") {
		return true // dbconn.Classify's form of the same errors
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1836:
		return true
	case 1290:
		return strings.Contains(strings.ToLower(me.Message), "read-only") || strings.Contains(strings.ToLower(me.Message), "read_only")
	}
	return false
}

// retryNote is the log line of an applier restart.
func retryNote(err error, wait string) string {
	if targetReadOnly(err) {
		return "the target is read-only (" + oneLine(err) + "); retrying with backoff, next in " + wait + ", and resuming from the checkpoint as soon as it takes writes (SET GLOBAL read_only=0 on the target)"
	}
	return "applier stopped (" + oneLine(err) + "); restarting from the checkpoint in " + wait
}
