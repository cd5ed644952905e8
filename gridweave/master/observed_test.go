package master

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/standby"
	"gridweave.dev/mesh/wgkey"
)

// TestEveryReplicaShowsWhatTheLeadersDeviceObserved: a replica without
// the device answers the peer statuses the leader's device observed,
// asked over the channel with the replicas' credential; while no leader
// answers it shows nothing observed, as before.
func TestEveryReplicaShowsWhatTheLeadersDeviceObserved(t *testing.T) {
	ctx := context.Background()
	_, masterKey, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	_, peerKey, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	// The leader's standby mesh, its device attached and a peer observed.
	device := memmesh.New(masterKey)
	if err := device.UpsertPeer(ctx, mesh.Peer{PublicKey: peerKey, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.240.2/32")}}); err != nil {
		t.Fatal(err)
	}
	seen := mesh.PeerStatus{PublicKey: peerKey, Endpoint: netip.MustParseAddrPort("203.0.113.7:41641"), LastHandshake: time.Now().UTC().Truncate(time.Second), RxBytes: 1200, TxBytes: 800}
	if err := device.SetStatus(seen); err != nil {
		t.Fatal(err)
	}
	leader := standby.New(masterKey)
	leader.Attach(device)
	var leading atomic.Bool
	leading.Store(true)
	const credential = "the replicas' credential"
	channel := httptest.NewServer(observedHandler(leader, credential, leading.Load))
	t.Cleanup(channel.Close)

	follower := standby.New(masterKey)
	if err := follower.UpsertPeer(ctx, mesh.Peer{PublicKey: peerKey, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.240.2/32")}}); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	follower.Observe(&leaderObserver{
		leader: func(context.Context, bool) (leaderstore.Target, error) {
			asked.Add(1)
			return leaderstore.Target{URL: channel.URL}, nil
		},
		client: channel.Client(), credential: credential, maxAge: time.Hour,
	})
	statuses, err := follower.PeerStatuses(ctx)
	if err != nil || len(statuses) != 1 || statuses[0] != seen {
		t.Fatalf("the follower's statuses: %+v, %v; want the leader's %+v", statuses, err, seen)
	}
	if st, err := follower.PeerStatus(ctx, peerKey); err != nil || st != seen {
		t.Errorf("the follower's status of the peer: %+v, %v; want %+v", st, err, seen)
	}
	if asked.Load() != 1 {
		t.Errorf("the leader was asked %d times for two reads within maxAge; want once", asked.Load())
	}

	// No credential, or no longer leading: refused; a follower whose
	// question fails shows nothing observed.
	resp, err := http.Get(channel.URL + observedPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the credential: %s, want 401", resp.Status)
	}
	leading.Store(false)
	other := standby.New(masterKey)
	if err := other.UpsertPeer(ctx, mesh.Peer{PublicKey: peerKey}); err != nil {
		t.Fatal(err)
	}
	other.Observe(&leaderObserver{
		leader: func(context.Context, bool) (leaderstore.Target, error) {
			return leaderstore.Target{URL: channel.URL}, nil
		},
		client: channel.Client(), credential: credential, maxAge: time.Hour,
	})
	statuses, err = other.PeerStatuses(ctx)
	if err != nil || len(statuses) != 1 || statuses[0].Endpoint.IsValid() || !statuses[0].LastHandshake.IsZero() {
		t.Errorf("with no leader answering: %+v, %v; want the peer with nothing observed", statuses, err)
	}
}

// TestAnsweringNeedsARecentRenewal: a replica answers the others only
// while it leads and renewed the Lease within half its duration, by the
// monotonic clock and by the wall clock: a machine suspended since its
// renewal (its monotonic clock stopped, the wall clock went on) does not.
func TestAnsweringNeedsARecentRenewal(t *testing.T) {
	r := &replica{duration: leaseDuration(4 * time.Second)}
	now := time.Now()
	for _, c := range []struct {
		leading bool
		renewed time.Time
		want    bool
		// suspended: the wall clock moved an hour more than the
		// monotonic one since the renewal
		suspended bool
	}{
		{false, now, false, false},
		{true, now, true, false},
		{true, now.Add(-1900 * time.Millisecond), true, false},
		{true, now.Add(-2100 * time.Millisecond), false, false},
		{true, time.Time{}, false, false},
		{true, now, false, true},
	} {
		r.leading.Store(c.leading)
		r.renewedAt(c.renewed)
		if c.renewed.IsZero() {
			r.renewed.Store(int64(-time.Hour)) // never renewed
		}
		if c.suspended {
			r.renewedWall.Store(c.renewed.Add(-time.Hour).UnixNano())
		}
		if got := r.answering(); got != c.want {
			t.Errorf("leading %v, renewed %v ago: answering %v, want %v", c.leading, time.Since(c.renewed).Round(time.Millisecond), got, c.want)
		}
	}
}
