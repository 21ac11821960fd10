package console

import (
	"regexp"
)

// Secrets never reach a page: the status files hold none, but an error
// line may quote a DSN or a setting, so every text from a task is masked.
var (
	dsnPassword = regexp.MustCompile(`([A-Za-z0-9_.%-]+):([^@/\s:]+)@(tcp\(|unix\(|[A-Za-z0-9.\[\]-]+[:/])`)
	kvPassword  = regexp.MustCompile(`(?i)((?:password|passwd|pwd|token|secret)["']?\s*[=:]\s*["']?)([^"'\s,;)]+)`)
	gtidIn      = regexp.MustCompile(`(?:^|[^0-9A-Za-z.-])(\d+-\d+-\d+)(?:$|[^0-9-])`)
	posIn       = regexp.MustCompile(`(?:^|[\s(])([A-Za-z0-9_.-]+\.\d{6,}:\d+)`)
)

// Mask replaces what looks like a password in s with ***.
func Mask(s string) string {
	s = dsnPassword.ReplaceAllString(s, "$1:***@$3")
	return kvPassword.ReplaceAllString(s, "${1}***")
}
