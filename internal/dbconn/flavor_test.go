package dbconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		f    Flavor
		want string
	}{
		{"10.11.6-MariaDB-0+deb12u1", MariaDB, "10.11.6"},
		{"10.11.6-MariaDB-log", MariaDB, "10.11.6"},
		{"8.0.11-TiDB-v8.4.0", TiDB, "v8.4.0"},
		{"8.0.11-TiDB-v8.4.0-alpha-69-ge4e814f", TiDB, "v8.4.0"},
		{"8.0.36", MySQL, "8.0.36"},
	} {
		f, v := ParseVersion(c.in)
		if f != c.f || v != c.want {
			t.Errorf("ParseVersion(%q) = %v %q, want %v %q", c.in, f, v, c.f, c.want)
		}
	}
}

func TestTiDBTxnTooLarge(t *testing.T) {
	e := Classify(&mysql.MySQLError{Number: 8004, Message: "Transaction is too large, size: 104857600"}, "target", sluice.Endpoint{Host: "h", Port: 4000})
	var se *sluice.Error
	if !errors.As(e, &se) || !errors.Is(e, sluice.ErrConfig) || !strings.Contains(se.Hint, "txn-total-size-limit") || !strings.Contains(e.Error(), "Transaction is too large") {
		t.Fatalf("8004 classified as %v", e)
	}
	if TiDBTxnTooLarge(&mysql.MySQLError{Number: 1062}, "x") != nil {
		t.Fatal("a duplicate key is not a size limit")
	}
}
