package apply

import "testing"

// TestCheckFailedMessages: the server's messages for a failed check, as
// MariaDB and MySQL print the expression, give the check and its number.
func TestCheckFailedMessages(t *testing.T) {
	for msg, want := range map[string][2]string{
		"BIGINT UNSIGNED value is out of range in '~0 + (row_count() <> 1) * 17'":          {"row_count()", "17"},
		"BIGINT UNSIGNED value is out of range in '~0 + (@@warning_count <> 0) * 3'":       {"@@warning_count", "3"},
		"BIGINT UNSIGNED value is out of range in '(~(0) + ((row_count() <> 200) * 42))'":  {"row_count()", "42"},
		"BIGINT UNSIGNED value is out of range in '(~(0) + ((@@warning_count <> 0) * 5))'": {"@@warning_count", "5"},
	} {
		m := checkFailed.FindStringSubmatch(msg)
		if m == nil || m[1] != want[0] || m[2] != want[1] {
			t.Errorf("%s: got %q, want %q", msg, m, want)
		}
	}
	if m := checkFailed.FindStringSubmatch("BIGINT UNSIGNED value is out of range in '`t`.`a` * 2'"); m != nil {
		t.Errorf("a message of another statement matched: %q", m)
	}
}
