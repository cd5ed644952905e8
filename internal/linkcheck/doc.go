// Package linkcheck reads what a binary of this module links (`go list
// -deps`) for the tests that keep binaries lean: no test code in what
// ships.
package linkcheck
