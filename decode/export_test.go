package decode

// RawBytesCollation exposes rawBytesCollation to the external tests, which
// check it against a real server's list of collations.
var RawBytesCollation = rawBytesCollation

// MariaGTIDString exposes mariaGTIDString, checked against go-mysql's text.
var MariaGTIDString = mariaGTIDString
