package joinkeys

import (
	"errors"
	"fmt"
	"net/netip"

	"gridweave.dev/joinkeys/addrpool"
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
	ErrPoolExhausted     = addrpool.ErrExhausted

	// ErrNodeChanged: a node's record was written, or released and taken
	// again, between the read a write was based on and the write. The
	// Keyring retries such writes from a fresh read a few times before it
	// returns it.
	ErrNodeChanged = errors.New("node record changed concurrently")
	// ErrNodeDisconnected: the node is being disconnected (its record is
	// marked disconnected until the teardown finishes); it cannot re-join
	// or register until an administrator's disconnect has released it.
	ErrNodeDisconnected = errors.New("node is disconnected")
	// ErrFenced: the store's write was refused because another writer
	// took the ledger over (a replica that lost the lead, and had not
	// noticed yet); nothing was written.
	ErrFenced = errors.New("ledger: another replica leads now; this one's writes are refused")
	// ErrPodCIDRConflict is wrapped by *PodCIDRConflictError.
	ErrPodCIDRConflict = errors.New("pod CIDR overlaps addresses already routed elsewhere")
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
// different public key. It carries that node for administrators; its
// message, which may reach the machine that asked, names only the hostname.
type HostnameTakenError struct {
	Existing Node
}

func (e *HostnameTakenError) Error() string {
	return fmt.Sprintf("hostname %q is held by another machine; an administrator can free it by disconnecting that node, or join under another hostname",
		e.Existing.Hostname)
}

// Is makes errors.Is(err, ErrHostnameTaken) hold.
func (e *HostnameTakenError) Is(target error) bool { return target == ErrHostnameTaken }

// PublicKeyTakenError is returned when a public key is already registered
// under another hostname. The key is the caller's own, so the message names
// the hostname it is registered under.
type PublicKeyTakenError struct {
	Existing Node
}

func (e *PublicKeyTakenError) Error() string {
	return fmt.Sprintf("this public key is registered for hostname %q; re-join with that hostname or disconnect it first",
		e.Existing.Hostname)
}

// Is makes errors.Is(err, ErrPublicKeyTaken) hold.
func (e *PublicKeyTakenError) Is(target error) bool { return target == ErrPublicKeyTaken }

// PodCIDRConflictError is returned when a pod CIDR would overlap addresses
// the mesh already routes elsewhere: the VPN pool, the master's own
// prefixes, or another node's pod CIDR (then Hostname names that node).
type PodCIDRConflictError struct {
	PodCIDR  netip.Prefix // the refused prefix
	Overlaps netip.Prefix // what it overlaps
	Hostname string       // the node holding Overlaps; empty for the pool or the master
	What     string       // "the VPN pool", "the master's addresses" or "the pod CIDR of node …"
}

func (e *PodCIDRConflictError) Error() string {
	return fmt.Sprintf("pod CIDR %s overlaps %s (%s)", e.PodCIDR, e.What, e.Overlaps)
}

// Is makes errors.Is(err, ErrPodCIDRConflict) hold.
func (e *PodCIDRConflictError) Is(target error) bool { return target == ErrPodCIDRConflict }

// NodePodCIDRConflict returns the error a Store gives when pod overlaps the
// pod CIDR held of node hostname.
func NodePodCIDRConflict(pod netip.Prefix, hostname string, held netip.Prefix) *PodCIDRConflictError {
	return &PodCIDRConflictError{PodCIDR: pod, Overlaps: held, Hostname: hostname, What: fmt.Sprintf("the pod CIDR of node %q", hostname)}
}
