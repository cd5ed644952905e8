package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// observedPath is where the leader answers, on the replicas' channel,
// what its WireGuard device observed of every peer: the endpoints the
// peer directory offers first and the handshakes the node list shows, the
// same from every replica.
const observedPath = "/observed/v1/peers"

// observedPeer is a mesh.PeerStatus on the channel.
type observedPeer struct {
	PublicKey     wgkey.Key      `json:"public_key"`
	Endpoint      netip.AddrPort `json:"endpoint,omitzero"`
	LastHandshake time.Time      `json:"last_handshake,omitzero"`
	RxBytes       int64          `json:"rx_bytes,omitempty"`
	TxBytes       int64          `json:"tx_bytes,omitempty"`
}

// maxObservedBytes bounds the answer: about 200 bytes a peer.
const maxObservedBytes = 64 << 20

// observedHandler answers observer's peer statuses to a caller with the
// replicas' credential, while leading says this replica leads (503
// otherwise, 401 without the credential).
func observedHandler(observer mesh.Observer, credential string, leading func() bool) http.Handler {
	return leaderstore.ForReplicas(credential, leading, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		statuses, err := observer.PeerStatuses(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := make([]observedPeer, len(statuses))
		for i, st := range statuses {
			out[i] = observedPeer{st.PublicKey, st.Endpoint, st.LastHandshake, st.RxBytes, st.TxBytes}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
}

// leaderObserver is a mesh.Observer that answers what the leader's device
// observed, asked over the replicas' channel and reused for maxAge: a
// replica without the device shows the leader's.
type leaderObserver struct {
	leader     func(ctx context.Context, refresh bool) (leaderstore.Target, error)
	client     *http.Client
	credential string
	maxAge     time.Duration

	mu       sync.Mutex
	read     time.Time // when statuses were read; zero: never
	statuses []mesh.PeerStatus
	byKey    map[wgkey.Key]mesh.PeerStatus
	// failed is when asking last failed, and why: not asked again for
	// maxAge, so a failover does not make every request wait on it.
	failed    time.Time
	failedWhy error
}

// askTimeout bounds one question to the leader.
const askTimeout = 2 * time.Second

var _ mesh.Observer = (*leaderObserver)(nil)

// errNoLeaderDevice: no leader answered what its device observed.
var errNoLeaderDevice = errors.New("no leader's device to ask")

// PeerStatuses implements mesh.Observer.
func (o *leaderObserver) PeerStatuses(ctx context.Context) ([]mesh.PeerStatus, error) {
	statuses, _, err := o.current(ctx)
	return statuses, err
}

// PeerStatus implements mesh.Observer.
func (o *leaderObserver) PeerStatus(ctx context.Context, key wgkey.Key) (mesh.PeerStatus, error) {
	_, byKey, err := o.current(ctx)
	if err != nil {
		return mesh.PeerStatus{}, err
	}
	st, ok := byKey[key]
	if !ok {
		return mesh.PeerStatus{}, mesh.ErrPeerNotFound
	}
	return st, nil
}

// current is the leader's answer, read again when older than maxAge.
func (o *leaderObserver) current(ctx context.Context) ([]mesh.PeerStatus, map[wgkey.Key]mesh.PeerStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.read.IsZero() && time.Since(o.read) < o.maxAge {
		return o.statuses, o.byKey, nil
	}
	if !o.failed.IsZero() && time.Since(o.failed) < o.maxAge {
		return nil, nil, o.failedWhy
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	statuses, err := o.ask(ctx)
	if err != nil {
		o.failed, o.failedWhy = time.Now(), err
		return nil, nil, err
	}
	o.failed, o.failedWhy = time.Time{}, nil
	o.byKey = make(map[wgkey.Key]mesh.PeerStatus, len(statuses))
	for _, st := range statuses {
		o.byKey[st.PublicKey] = st
	}
	o.statuses, o.read = statuses, time.Now()
	return o.statuses, o.byKey, nil
}

func (o *leaderObserver) ask(ctx context.Context) ([]mesh.PeerStatus, error) {
	target, err := o.leader(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoLeaderDevice, err)
	}
	if target.URL == "" {
		return nil, errNoLeaderDevice
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.URL+observedPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+o.credential)
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoLeaderDevice, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: the leader answered %s", errNoLeaderDevice, resp.Status)
	}
	var peers []observedPeer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxObservedBytes)).Decode(&peers); err != nil {
		return nil, fmt.Errorf("%w: a malformed answer: %w", errNoLeaderDevice, err)
	}
	out := make([]mesh.PeerStatus, len(peers))
	for i, p := range peers {
		out[i] = mesh.PeerStatus{PublicKey: p.PublicKey, Endpoint: p.Endpoint, LastHandshake: p.LastHandshake, RxBytes: p.RxBytes, TxBytes: p.TxBytes}
	}
	return out, nil
}
