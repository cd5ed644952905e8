package wgkey

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
)

// Len is the length of a WireGuard key in bytes.
const Len = 32

// Key is a WireGuard (Curve25519) public key. Private keys have a type of
// their own, PrivateKey, which never prints its bytes.
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

// PrivateKey is a WireGuard private key. It formats, logs and refuses to
// marshal as text without its bytes, so that a struct holding one can be
// logged or encoded by mistake without leaking it; Base64 reveals it on
// purpose (for a device configuration or a 0600 state file).
type PrivateKey [Len]byte

// ParsePrivate decodes a private key written as Parse expects.
func ParsePrivate(s string) (PrivateKey, error) {
	k, err := Parse(s)
	return PrivateKey(k), err
}

// Base64 returns the key in the standard base64 form `wg` reads. Use it
// only where the key is meant to go.
func (k PrivateKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// String returns a placeholder, never the key.
func (k PrivateKey) String() string { return "(WireGuard private key)" }

// GoString returns the placeholder too, so that %#v does not print the bytes.
func (k PrivateKey) GoString() string { return k.String() }

// LogValue implements slog.LogValuer with the placeholder.
func (k PrivateKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ErrPrivateKeyText is returned by PrivateKey.MarshalText.
var ErrPrivateKeyText = errors.New("wgkey: a private key is not marshalled as text; write PrivateKey.Base64() where it is meant to be stored")

// MarshalText refuses: a private key in JSON or YAML is a leak more often
// than it is meant.
func (k PrivateKey) MarshalText() ([]byte, error) { return nil, ErrPrivateKeyText }

// UnmarshalText implements encoding.TextUnmarshaler with Parse's rules.
func (k *PrivateKey) UnmarshalText(text []byte) error {
	parsed, err := ParsePrivate(string(text))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// IsZero reports whether k is all zero bytes (the unset key).
func (k PrivateKey) IsZero() bool { return k == PrivateKey{} }

// GeneratePrivate returns a new random private key.
func GeneratePrivate() (PrivateKey, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return PrivateKey{}, err
	}
	var k PrivateKey
	copy(k[:], priv.Bytes())
	return k, nil
}

// Public returns the public key of private key k.
func (k PrivateKey) Public() (Key, error) {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		return Key{}, err
	}
	var pub Key
	copy(pub[:], priv.PublicKey().Bytes())
	return pub, nil
}

// GeneratePair returns a new private key and its public key.
func GeneratePair() (private PrivateKey, public Key, err error) {
	if private, err = GeneratePrivate(); err != nil {
		return PrivateKey{}, Key{}, err
	}
	public, err = private.Public()
	return private, public, err
}
