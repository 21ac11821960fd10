package relay

// FDEChecksum reports whether the events after this format description
// event (raw, as stored) carry a CRC32 trailer. The binlog service needs
// it to rewrite a file's FDE and to build its own events alike.
func FDEChecksum(raw []byte) bool { return fdeChecksum(raw) }
