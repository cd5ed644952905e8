package randhex

import (
	"crypto/rand"
	"encoding/hex"
)

// String returns n random bytes from crypto/rand as 2n lowercase hex
// digits. crypto/rand.Read does not fail (the program stops first).
func String(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
