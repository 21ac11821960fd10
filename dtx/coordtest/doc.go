// Package coordtest holds unit tests of the coordinator's state machine:
// a coordinator on the in-memory store, calling its branches through
// wire.Fake, with no network and no database.
package coordtest
