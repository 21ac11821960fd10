package decode

import (
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/binlogev"
)

// decodeRowsEvent is go-mysql's rows decoding (RowsEvent.Decode) without
// its largest waste. go-mysql builds the table's UnsignedMap, a map, anew
// for every row image it decodes: a fifth of the decoder's allocations in
// the catch-up benchmark (issue 18). When the table map's signedness
// bitmap marks no column unsigned, that map answers false for every
// column, and so does the nil map UnsignedMap returns for a table map
// without the bitmap: the rows are decoded with the bitmap hidden, and
// every value comes out as it would have (TestRowsDecodeSameAsGoMySQL).
//
// Ownership: the bitmap is hidden in the table map itself, which the
// parser shares between the rows events of a statement, and put back
// before this returns. That is safe because a parser and its table maps
// are used by one goroutine (relay.Reader is not safe for concurrent use,
// and a transaction payload's inner events are parsed one after another):
// nothing else reads the table map while its rows are being decoded.
func decodeRowsEvent(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	tm := e.Table
	if hasCompressedType(tm) {
		// go-mysql cannot read them (compressed.go): no rows, and the
		// decoder refuses the event if its table is replicated.
		return nil
	}
	if tm == nil || len(tm.SignednessBitmap) == 0 || !allSigned(tm) {
		return e.DecodeData(pos, data)
	}
	bitmap := tm.SignednessBitmap
	tm.SignednessBitmap = nil
	defer func() { tm.SignednessBitmap = bitmap }()
	return e.DecodeData(pos, data)
}

// allSigned reports whether the signedness bitmap marks no numeric column
// unsigned. The bitmap has a bit per numeric column only; a set bit past
// the last one (which the server never writes) counts as unsigned, so the
// answer errs towards go-mysql's own path.
func allSigned(tm *replication.TableMapEvent) bool {
	for _, b := range tm.SignednessBitmap {
		if b != 0 {
			return false
		}
	}
	return true
}

// mariaGTIDString is MariadbGTID.String without fmt (binlogev.MariaGTIDText).
func mariaGTIDString(g *mysql.MariadbGTID) string { return binlogev.MariaGTIDText(g) }
