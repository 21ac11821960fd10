package decode_test

import (
	"testing"

	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestRawBytesCollationMatchesServer checks the decoder's classification
// of every collation id the real server knows: text in a UTF-8 character
// set may travel as a string, anything else must stay raw bytes.
func TestRawBytesCollationMatchesServer(t *testing.T) {
	db := sandboxtest.MustOpen(t, srcInst, "")
	rows, err := db.Query("SELECT ID, CHARACTER_SET_NAME, FULL_COLLATION_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id uint64
		var cs, name string
		if err := rows.Scan(&id, &cs, &name); err != nil {
			t.Fatal(err)
		}
		n++
		utf8 := cs == "utf8mb4" || cs == "utf8mb3" || cs == "ascii"
		if got := decode.RawBytesCollation(id); got == utf8 {
			t.Errorf("collation %s (id %d, charset %s): raw bytes = %v, want %v", name, id, cs, got, !utf8)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 300 {
		t.Fatalf("the server listed only %d collations", n)
	}
}
