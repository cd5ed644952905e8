package joinkeys

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers test with errors.Is; the HTTP layer maps them to status codes.
var (
	// ErrInvalidInput is wrapped by *FieldError: a request field is malformed.
	ErrInvalidInput = errors.New("invalid input")

	// ErrKeyInvalid: the presented key is malformed, unknown, or its secret
	// or signature does not match. Deliberately one error, so that a caller
	// cannot probe which part was wrong.
	ErrKeyInvalid     = errors.New("join key is not valid")
	ErrKeyNotFound    = errors.New("join key not found")
	ErrKeyExpired     = errors.New("join key has expired")
	ErrKeyNotYetValid = errors.New("join key is not valid yet")
	ErrKeyRevoked     = errors.New("join key was revoked")
	ErrKeyExhausted   = errors.New("join key has no uses left")

	ErrNodeNotFound      = errors.New("node not found")
	ErrHostnameTaken     = errors.New("hostname is held by another node")
	ErrPublicKeyTaken    = errors.New("public key is registered under another hostname")
	ErrNodeTokenRequired = errors.New("node already joined: a re-join must present its node token")
	ErrNodeTokenInvalid  = errors.New("node token is not valid")
	ErrPoolExhausted     = errors.New("no free VPN address left in the pool")
)

// FieldError reports a malformed field of a request, naming it.
type FieldError struct {
	Field   string // the field's wire name, e.g. "hostname"
	Problem string // what is wrong, as a sentence fragment
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalidInput) hold.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidInput }

func fieldError(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// HostnameTakenError is returned when a hostname is held by a node with a
// different public key. It carries that node so callers can say how to free it.
type HostnameTakenError struct {
	Existing Node
}

func (e *HostnameTakenError) Error() string {
	return fmt.Sprintf("hostname %q is held by the node with public key %s (VPN IP %s); disconnect that node to free the hostname",
		e.Existing.Hostname, e.Existing.PublicKey, e.Existing.VPNIP)
}

// Is makes errors.Is(err, ErrHostnameTaken) hold.
func (e *HostnameTakenError) Is(target error) bool { return target == ErrHostnameTaken }

// PublicKeyTakenError is returned when a public key is already registered
// under another hostname.
type PublicKeyTakenError struct {
	Existing Node
}

func (e *PublicKeyTakenError) Error() string {
	return fmt.Sprintf("public key %s is registered for hostname %q; re-join with that hostname or disconnect it first",
		e.Existing.PublicKey, e.Existing.Hostname)
}

// Is makes errors.Is(err, ErrPublicKeyTaken) hold.
func (e *PublicKeyTakenError) Is(target error) bool { return target == ErrPublicKeyTaken }
