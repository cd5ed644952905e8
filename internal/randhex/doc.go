// Package randhex makes random identifiers and secrets written in hex:
// String(n) is n bytes from crypto/rand as 2n lowercase hex digits.
package randhex
