// Package storetest is the contract suite of the worldstore.Store port.
// Every implementation runs it: worldstore.Memory in package worldstore's
// tests, the SQLite and PostgreSQL stores in worldstore/sqlworld's.
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) worldstore.Store { return openFresh(t) })
//		storetest.RunShared(t, func(t *testing.T) (a, b worldstore.Store) { return openTwoOnOneDatabase(t) })
//	}
//
// Run's open returns a fresh, empty store each call and arranges its Close
// with t.Cleanup (the suite closes some stores itself; Close is
// idempotent). RunShared's open returns two handles on one fresh, empty
// store (two connections to one database; for an in-process store, the
// same value twice): the races of session epochs and chunk revisions run
// across them.
//
// One subtest per claim of package worldstore's doc (the numbered
// invariants), plus the argument checks and the lifecycle (a cancelled
// context, Close). It owns no production code and imports only worldstore,
// its dependencies' types, errcode and the standard library.
package storetest
