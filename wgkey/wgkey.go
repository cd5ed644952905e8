package wgkey

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Len is the length of a WireGuard key in bytes.
const Len = 32

// Key is a WireGuard (Curve25519) public or private key.
type Key [Len]byte

// ErrInvalid is wrapped by every Parse error.
var ErrInvalid = errors.New("invalid WireGuard key")

// Parse decodes a key written as standard base64 of exactly 32 bytes
// (44 characters with one '=' of padding), as `wg` prints them.
func Parse(s string) (Key, error) {
	var k Key
	if len(s) != base64.StdEncoding.EncodedLen(Len) {
		return k, fmt.Errorf("%w: want 44 base64 characters encoding 32 bytes, got %d characters", ErrInvalid, len(s))
	}
	n, err := base64.StdEncoding.Strict().Decode(k[:], []byte(s))
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n != Len {
		return Key{}, fmt.Errorf("%w: decodes to %d bytes, want 32", ErrInvalid, n)
	}
	return k, nil
}

// MustParse is Parse for constants in tests and examples; it panics on error.
func MustParse(s string) Key {
	k, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return k
}

// String returns the standard base64 form.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether k is all zero bytes (the unset key).
func (k Key) IsZero() bool { return k == Key{} }

// MarshalText implements encoding.TextMarshaler.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with Parse's rules.
func (k *Key) UnmarshalText(text []byte) error {
	parsed, err := Parse(string(text))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// GeneratePrivate returns a new random private key.
func GeneratePrivate() (Key, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, err
	}
	var k Key
	copy(k[:], priv.Bytes())
	return k, nil
}

// Public returns the public key of private key k.
func (k Key) Public() (Key, error) {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		return Key{}, err
	}
	var pub Key
	copy(pub[:], priv.PublicKey().Bytes())
	return pub, nil
}

// GeneratePair returns a new private key and its public key.
func GeneratePair() (private, public Key, err error) {
	if private, err = GeneratePrivate(); err != nil {
		return Key{}, Key{}, err
	}
	public, err = private.Public()
	return private, public, err
}
