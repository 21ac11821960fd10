package decode

import "testing"

// TestQueryMicros reads the start time's microseconds from status
// variables as MariaDB 10.11 writes them for a DDL (flags2, sql_mode,
// catalog, auto_increment, charset, time zone, then Q_HRNOW, then Q_XID),
// and stops at a code it does not know, as the server does.
func TestQueryMicros(t *testing.T) {
	vars := []byte{
		0x00, 0, 0, 0, 0, // Q_FLAGS2_CODE
		0x01, 0x22, 0, 0xa0, 0x55, 0, 0, 0, 0, // Q_SQL_MODE_CODE
		0x06, 3, 's', 't', 'd', // Q_CATALOG_NZ_CODE
		0x03, 1, 0, 1, 0, // Q_AUTO_INCREMENT
		0x04, 0x21, 0, 0x21, 0, 0x08, 0, // Q_CHARSET_CODE
		0x05, 6, '+', '0', '0', ':', '0', '0', // Q_TIME_ZONE_CODE
		0x0c, 1, 'd', 'b', 0, // Q_UPDATED_DB_NAMES
		0x80, 0x15, 0x67, 0x06, // Q_HRNOW: 419605
		0x81, 1, 2, 3, 4, 5, 6, 7, 8, // Q_XID
	}
	if us, ok := queryMicros(vars); !ok || us != 0x066715 {
		t.Fatalf("queryMicros = %d, %v; want %d", us, ok, 0x066715)
	}
	for name, v := range map[string][]byte{
		"none":         {0x00, 0, 0, 0, 0, 0x81, 1, 2, 3, 4, 5, 6, 7, 8},
		"unknown code": {0x00, 0, 0, 0, 0, 0x42, 1, 0x80, 1, 2, 3},
		"cut short":    {0x06, 9, 's', 't', 'd'},
		"empty":        nil,
	} {
		if us, ok := queryMicros(v); ok {
			t.Errorf("%s: found %d", name, us)
		}
	}
}
