package fleet

import (
	"errors"
	"fmt"
)

// The kinds of *Error. The ledger's own errors (joinkeys.ErrKeyExpired,
// *joinkeys.HostnameTakenError, ...) and the mesh's pass through the
// fleet unchanged.
var (
	// ErrInvalid: a field of the request is malformed; Error.Field names it.
	ErrInvalid = errors.New("invalid field")
	// ErrCredentialRequired: the request carries neither a join key nor a
	// node token.
	ErrCredentialRequired = errors.New("a credential is required")
	// ErrPublicKeyMismatch: a node token was presented with a WireGuard
	// public key other than the one the node joined with.
	ErrPublicKeyMismatch = errors.New("the public key is not the node's")
	// ErrPodCIDROutsideCluster: the pod CIDR a node's Kubernetes Node
	// carries is not a per-node prefix inside the cluster's pod range
	// (Config.ClusterCIDR, Config.NodeCIDRMaskBits); it is never
	// recorded, routed or allowed.
	ErrPodCIDROutsideCluster = errors.New("the pod CIDR is outside the cluster's pod range")
)

// Error is a refusal of the fleet's own: Kind is one of the sentinels
// above (errors.Is matches it), Field the request field at fault.
type Error struct {
	Kind    error
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(field, format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// VersionMismatchError refuses a node whose major version differs from
// the server's. The node updates by running the join command again: the
// script fetches the master's agent and keeps the node's identity.
type VersionMismatchError struct {
	Server string // the server's version
	Worker string // the version the node sent
	Min    string // the lowest version admitted (MAJOR.0.0)
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("worker version %s is not compatible with server version %s (major versions differ): run the join command again on the node to update its agent", e.Worker, e.Server)
}
