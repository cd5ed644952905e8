package leaderstore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

// PathPrefix is where Handler serves the writes and the fresh reads:
// PathPrefix + an operation's name (insert_key, revoke_key, reserve_node,
// update_node, delete_node, append_audit, prune_audit; key, node,
// node_by_public_key), each a POST of JSON.
const PathPrefix = "/ledger/v1/"

// Credential derives the replicas' shared credential from a secret of the
// master's identity (the JWT secret every replica holds): the bearer
// token a follower presents and the leader's Handler requires. It is not
// the secret itself, so the channel never carries that.
func Credential(secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("gridweave ledger: the replicas' write channel"))
	return hex.EncodeToString(mac.Sum(nil))
}

// ErrLeaderUnavailable is returned for a write no leader took within
// Options.Wait, one the channel refused before the leader's Store saw it
// (a credential the replicas do not share, a body the leader cannot
// read), or one whose answer was lost after it reached the leader (then
// it may or may not have been written).
var ErrLeaderUnavailable = errors.New("ledger: no leader took the write")

// The bodies of the operations.
type (
	insertKeyRequest struct {
		Key joinkeys.KeyRecord `json:"key"`
	}
	revokeKeyRequest struct {
		ID string    `json:"id"`
		At time.Time `json:"at"`
	}
	returnKeyUseRequest struct {
		ID string `json:"id"`
	}
	reserveNodeRequest struct {
		Node           joinkeys.NodeRecord `json:"node"`
		Prefix         netip.Prefix        `json:"prefix"`
		Reserved       []netip.Addr        `json:"reserved,omitempty"`
		SpendKeyID     string              `json:"spend_key_id,omitempty"`
		Now            time.Time           `json:"now"`
		ReleasedBefore time.Time           `json:"released_before"`
		Event          joinkeys.AuditEvent `json:"event"`
	}
	updateNodeRequest struct {
		Node  joinkeys.NodeRecord `json:"node"`
		Event joinkeys.AuditEvent `json:"event"`
	}
	deleteNodeRequest struct {
		Hostname string    `json:"hostname"`
		Revision int64     `json:"revision"`
		At       time.Time `json:"at"`
	}
	appendAuditRequest struct {
		Event joinkeys.AuditEvent `json:"event"`
	}
	pruneAuditRequest struct {
		Retention joinkeys.AuditRetention `json:"retention"`
		Now       time.Time               `json:"now"`
	}
	// The reads that must be fresh, answered by the leader.
	keyRequest struct {
		ID string `json:"id"`
	}
	nodeRequest struct {
		Hostname string `json:"hostname"`
	}
	nodeByPublicKeyRequest struct {
		PublicKey wgkey.Key `json:"public_key"`
	}
)

func reservationRequest(r joinkeys.Reservation) reserveNodeRequest {
	return reserveNodeRequest{Node: r.Node, Prefix: r.Addresses.Prefix(), Reserved: r.Addresses.Reserved(),
		SpendKeyID: r.SpendKeyID, Now: r.Now, ReleasedBefore: r.ReleasedBefore, Event: r.Event}
}

func (q reserveNodeRequest) reservation() (joinkeys.Reservation, error) {
	addresses, err := addrpool.NewRange(q.Prefix, q.Reserved...)
	if err != nil {
		return joinkeys.Reservation{}, err
	}
	return joinkeys.Reservation{Node: q.Node, Addresses: addresses, SpendKeyID: q.SpendKeyID,
		Now: q.Now, ReleasedBefore: q.ReleasedBefore, Event: q.Event}, nil
}

// answer is every operation's response: its result, or the error the
// leader's Store returned.
type answer struct {
	Key     *joinkeys.KeyRecord  `json:"key,omitempty"`
	Node    *joinkeys.NodeRecord `json:"node,omitempty"`
	Removed int                  `json:"removed,omitempty"`
	Error   *wireError           `json:"error,omitempty"`
}

// wireError is an error of the leader's Store as it travels: a kind that
// names a joinkeys sentinel or error type, or a Kubernetes API status, and
// the error's text.
type wireError struct {
	Kind    string         `json:"kind"`
	Message string         `json:"message"`
	Node    *joinkeys.Node `json:"node,omitempty"` // of hostname_taken and public_key_taken
	// pod_cidr_conflict's
	PodCIDR  netip.Prefix `json:"pod_cidr,omitzero"`
	Overlaps netip.Prefix `json:"overlaps,omitzero"`
	Hostname string       `json:"hostname,omitempty"`
	What     string       `json:"what,omitempty"`
	// invalid_input's
	Field string `json:"field,omitempty"`
	// kubernetes's
	Status *metav1.Status `json:"status,omitempty"`
}

// Kinds of wireError besides the sentinels' names.
const (
	kindHostnameTaken   = "hostname_taken"
	kindPublicKeyTaken  = "public_key_taken"
	kindPodCIDRConflict = "pod_cidr_conflict"
	kindInvalidInput    = "invalid_input"
	kindKubernetes      = "kubernetes"
	kindNotLeader       = "not_leader"
	kindOther           = "other"
)

// sentinels are the errors a write may wrap, by their wire names, in the
// order they are tried.
var sentinels = []struct {
	kind string
	err  error
}{
	{"key_not_found", joinkeys.ErrKeyNotFound},
	{"key_invalid", joinkeys.ErrKeyInvalid},
	{"key_expired", joinkeys.ErrKeyExpired},
	{"key_not_yet_valid", joinkeys.ErrKeyNotYetValid},
	{"key_revoked", joinkeys.ErrKeyRevoked},
	{"key_exhausted", joinkeys.ErrKeyExhausted},
	{"node_not_found", joinkeys.ErrNodeNotFound},
	{"node_changed", joinkeys.ErrNodeChanged},
	{"node_disconnected", joinkeys.ErrNodeDisconnected},
	{"node_token_required", joinkeys.ErrNodeTokenRequired},
	{"node_token_invalid", joinkeys.ErrNodeTokenInvalid},
	{"pool_exhausted", joinkeys.ErrPoolExhausted},
	{"leader_unavailable", ErrLeaderUnavailable},
	{"fenced", joinkeys.ErrFenced},
	{"deadline_exceeded", context.DeadlineExceeded},
	{"canceled", context.Canceled},
}

func sentinel(kind string) (error, bool) {
	for _, s := range sentinels {
		if s.kind == kind {
			return s.err, true
		}
	}
	return nil, false
}

// encodeError is err as it travels.
func encodeError(err error) *wireError {
	w := &wireError{Kind: kindOther, Message: err.Error()}
	var (
		hostname *joinkeys.HostnameTakenError
		key      *joinkeys.PublicKeyTakenError
		pod      *joinkeys.PodCIDRConflictError
		field    *joinkeys.FieldError
		status   apierrors.APIStatus
	)
	switch {
	case errors.As(err, &hostname):
		w.Kind, w.Node = kindHostnameTaken, &hostname.Existing
	case errors.As(err, &key):
		w.Kind, w.Node = kindPublicKeyTaken, &key.Existing
	case errors.As(err, &pod):
		w.Kind, w.PodCIDR, w.Overlaps, w.Hostname, w.What = kindPodCIDRConflict, pod.PodCIDR, pod.Overlaps, pod.Hostname, pod.What
	case errors.As(err, &field):
		w.Kind, w.Field, w.Message = kindInvalidInput, field.Field, field.Problem
	default:
		// A sentinel says what the Store's contract means (the fence's
		// refusal is also a 403 of the API server); a Kubernetes status
		// travels whole when no sentinel names the error.
		for _, s := range sentinels {
			if errors.Is(err, s.err) {
				w.Kind = s.kind
				return w
			}
		}
		if errors.As(err, &status) {
			st := status.Status()
			w.Kind, w.Status = kindKubernetes, &st
		}
	}
	return w
}

// remoteError is a sentinel the leader's Store returned, with its text.
type remoteError struct {
	message  string
	sentinel error
}

func (e *remoteError) Error() string { return e.message }
func (e *remoteError) Unwrap() error { return e.sentinel }

// decode is the error w stands for.
func (w *wireError) decode() error {
	switch w.Kind {
	case kindHostnameTaken:
		if w.Node != nil {
			return &joinkeys.HostnameTakenError{Existing: *w.Node}
		}
	case kindPublicKeyTaken:
		if w.Node != nil {
			return &joinkeys.PublicKeyTakenError{Existing: *w.Node}
		}
	case kindPodCIDRConflict:
		return &joinkeys.PodCIDRConflictError{PodCIDR: w.PodCIDR, Overlaps: w.Overlaps, Hostname: w.Hostname, What: w.What}
	case kindInvalidInput:
		return &joinkeys.FieldError{Field: w.Field, Problem: w.Message}
	case kindKubernetes:
		if w.Status != nil {
			return &apierrors.StatusError{ErrStatus: *w.Status}
		}
	}
	if err, ok := sentinel(w.Kind); ok {
		return &remoteError{message: w.Message, sentinel: err}
	}
	return fmt.Errorf("ledger leader: %s", w.Message)
}
