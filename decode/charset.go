package decode

import "strings"

// utf8Collations are the collation ids (MariaDB 10.11) whose character set
// stores text as valid UTF-8: utf8mb4, utf8mb3 and ascii. go-mysql returns
// every string column as a Go string of the stored bytes; only these can be
// sent as text on the applier's utf8mb4 connection. Every other character
// set (latin1 in all its collations, NO PAD ones included, cp1251, gbk,
// ucs2, utf16, ...) must travel as raw bytes, or the target would read
// them as utf8mb4 and store different characters.
//
// The list comes from information_schema.COLLATION_CHARACTER_SET_APPLICABILITY
// of MariaDB 10.11; ids 2048-2503 are the uca1400 collations of utf8mb3 and
// utf8mb4 (MariaDB encodes the character set in those ids).
var utf8Collations = func() map[uint64]bool {
	m := map[uint64]bool{}
	for _, id := range []uint64{
		// utf8mb4
		45, 46, 608, 609, 610, 1069, 1070, 1248, 1270,
		// utf8mb3
		33, 83, 223, 576, 577, 578, 1057, 1107, 1216, 1238,
		// ascii
		11, 65, 1035, 1089,
	} {
		m[id] = true
	}
	for id := uint64(192); id <= 215; id++ { // utf8mb3 unicode and language collations
		m[id] = true
	}
	for id := uint64(224); id <= 247; id++ { // utf8mb4 unicode and language collations
		m[id] = true
	}
	return m
}()

// rawBytesCollation says whether values of a column in collation id must be
// kept as raw bytes: the binary collation and every non-UTF-8 character set.
// An id this build does not know is treated as raw bytes too: bytes written
// as a _binary literal are stored unchanged in any character set, while
// bytes sent as utf8mb4 text are converted.
func rawBytesCollation(id uint64) bool {
	if utf8Collations[id] {
		return false
	}
	if id >= 2048 && id <= 2247 || id >= 2304 && id <= 2503 { // uca1400 utf8mb3 / utf8mb4
		return false
	}
	return true
}

// rawBytesCharset is rawBytesCollation for a character set name, as the
// schema tracker records it.
func rawBytesCharset(cs string) bool {
	switch strings.ToLower(cs) {
	case "", "utf8mb4", "utf8mb3", "utf8", "ascii":
		return false // "": not a text column, or not known: leave the value as decoded
	}
	return true
}
