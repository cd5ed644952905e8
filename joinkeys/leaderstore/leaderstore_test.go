package leaderstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/storetest"
)

var credential = leaderstore.Credential([]byte("the master's JWT secret, shared by the replicas"))

// follower is a replica's Store that writes through a leader serving
// shared, reading shared itself as replicas read the one ledger.
func follower(t *testing.T, shared joinkeys.Store, leader func(context.Context, bool) (leaderstore.Target, error)) *leaderstore.Store {
	t.Helper()
	s, err := leaderstore.New(shared, leaderstore.Options{Leader: leader, Credential: credential, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func leading() bool { return true }

func serve(t *testing.T, store joinkeys.Store, leading func() bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(leaderstore.Handler(store, leaderstore.HandlerOptions{Credential: credential, Leading: leading}))
	t.Cleanup(srv.Close)
	return srv
}

func at(url string) func(context.Context, bool) (leaderstore.Target, error) {
	return func(context.Context, bool) (leaderstore.Target, error) { return leaderstore.Target{URL: url}, nil }
}

// TestConformance runs the Store suite on a follower: every write crosses
// the channel to the leader's Store, every read is the follower's own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		shared := new(memstore.Store)
		return follower(t, shared, at(serve(t, shared, leading).URL))
	})
}

// TestConformanceOnTheLeader runs it on the leader's own Store, which
// writes without the channel.
func TestConformanceOnTheLeader(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		return follower(t, new(memstore.Store), func(context.Context, bool) (leaderstore.Target, error) {
			return leaderstore.Target{Self: true}, nil
		})
	})
}

// failing is a Store whose writes return err.
type failing struct {
	memstore.Store
	err    error
	writes atomic.Int64
}

func (f *failing) ReserveNode(context.Context, joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	f.writes.Add(1)
	return joinkeys.NodeRecord{}, f.err
}

func reservation() joinkeys.Reservation {
	return joinkeys.Reservation{
		Node:      joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "gpu-1", Status: joinkeys.StatusValidated}},
		Addresses: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1").Addresses(),
		Now:       time.Now(),
	}
}

// TestErrorsCrossTheChannel: what the leader's Store returned is what the
// follower's caller gets, to errors.Is, errors.As and apierrors.
func TestErrorsCrossTheChannel(t *testing.T) {
	existing := joinkeys.Node{Hostname: "gpu-1", VPNIP: netip.MustParseAddr("198.18.0.7")}
	pod := joinkeys.NodePodCIDRConflict(netip.MustParsePrefix("10.42.1.0/24"), "gpu-2", netip.MustParsePrefix("10.42.0.0/16"))
	cases := []struct {
		err   error
		check func(error) bool
	}{
		{&joinkeys.HostnameTakenError{Existing: existing}, func(err error) bool {
			var e *joinkeys.HostnameTakenError
			return errors.As(err, &e) && e.Existing.VPNIP == existing.VPNIP && errors.Is(err, joinkeys.ErrHostnameTaken)
		}},
		{&joinkeys.PublicKeyTakenError{Existing: existing}, func(err error) bool {
			var e *joinkeys.PublicKeyTakenError
			return errors.As(err, &e) && e.Existing.Hostname == "gpu-1" && errors.Is(err, joinkeys.ErrPublicKeyTaken)
		}},
		{pod, func(err error) bool {
			var e *joinkeys.PodCIDRConflictError
			return errors.As(err, &e) && *e == *pod && errors.Is(err, joinkeys.ErrPodCIDRConflict)
		}},
		{&joinkeys.FieldError{Field: "hostname", Problem: "is empty"}, func(err error) bool {
			var e *joinkeys.FieldError
			return errors.As(err, &e) && e.Field == "hostname" && errors.Is(err, joinkeys.ErrInvalidInput)
		}},
		{apierrors.NewConflict(schema.GroupResource{Group: "ledger.gridweave.dev", Resource: "ledgernodes"}, "gpu-1", errors.New("changed")), apierrors.IsConflict},
		{apierrors.NewTooManyRequests("slow down", 1), apierrors.IsTooManyRequests},
		{fmt.Errorf("spending a use: %w", joinkeys.ErrKeyExhausted), func(err error) bool { return errors.Is(err, joinkeys.ErrKeyExhausted) }},
		// The fence's refusal is a 403 too: its meaning (nothing was
		// written, another replica leads) goes first.
		{fmt.Errorf("%w: %w", joinkeys.ErrFenced, apierrors.NewForbidden(schema.GroupResource{Group: "ledger.gridweave.dev", Resource: "ledgernodes"}, "gpu-1", errors.New("ledger-fence: not the holder"))),
			func(err error) bool { return errors.Is(err, joinkeys.ErrFenced) }},
		{joinkeys.ErrNodeChanged, func(err error) bool { return errors.Is(err, joinkeys.ErrNodeChanged) }},
		{joinkeys.ErrPoolExhausted, func(err error) bool { return errors.Is(err, joinkeys.ErrPoolExhausted) }},
		{joinkeys.ErrKeyNotFound, func(err error) bool { return errors.Is(err, joinkeys.ErrKeyNotFound) }},
		{joinkeys.ErrKeyRevoked, func(err error) bool { return errors.Is(err, joinkeys.ErrKeyRevoked) }},
		{context.DeadlineExceeded, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{errors.New("disk on fire"), func(err error) bool {
			return err.Error() == "ledger leader: disk on fire" && !errors.Is(err, leaderstore.ErrLeaderUnavailable)
		}},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			leader := &failing{err: c.err}
			_, err := follower(t, leader, at(serve(t, leader, leading).URL)).ReserveNode(context.Background(), reservation())
			if err == nil || !c.check(err) {
				t.Errorf("the leader's Store returned %#v; the follower's caller got %#v", c.err, err)
			}
			if err != nil && err.Error() != c.err.Error() && err.Error() != "ledger leader: "+c.err.Error() {
				t.Errorf("the text changed on the way: %q, want %q", err, c.err)
			}
		})
	}
}

// TestAWriteWaitsForALeader: while no replica leads, or the one asked
// does not, a write waits and lands once on the one that does.
func TestAWriteWaitsForALeader(t *testing.T) {
	shared := new(memstore.Store)
	var leads atomic.Bool
	deposed := serve(t, shared, func() bool { return false })
	next := serve(t, shared, leads.Load)
	var (
		mu      sync.Mutex
		target  = leaderstore.Target{}
		asked   atomic.Int64
		refresh atomic.Int64
	)
	store := follower(t, shared, func(_ context.Context, again bool) (leaderstore.Target, error) {
		asked.Add(1)
		if again {
			refresh.Add(1)
		}
		mu.Lock()
		defer mu.Unlock()
		return target, nil
	})
	go func() {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		target = leaderstore.Target{URL: deposed.URL} // the old leader, deposed
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		leads.Store(true)
		mu.Lock()
		target = leaderstore.Target{URL: next.URL}
		mu.Unlock()
	}()
	n, err := store.ReserveNode(context.Background(), reservation())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := shared.Node(context.Background(), "gpu-1"); err != nil || got.VPNIP != n.VPNIP {
		t.Fatalf("the ledger holds %+v, %v; the write answered %s", got, err, n.VPNIP)
	}
	if refresh.Load() == 0 || refresh.Load() != asked.Load()-1 {
		t.Errorf("asked for the leader %d times, %d of them to read again; want every try after the first to read again", asked.Load(), refresh.Load())
	}
}

// TestNoLeaderWithinTheWait: a write no leader takes fails with
// ErrLeaderUnavailable and writes nothing.
func TestNoLeaderWithinTheWait(t *testing.T) {
	shared := new(memstore.Store)
	notLeading := serve(t, shared, func() bool { return false })
	store, err := leaderstore.New(shared, leaderstore.Options{Leader: at(notLeading.URL), Credential: credential, Wait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReserveNode(context.Background(), reservation()); !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
		t.Fatalf("got %v, want ErrLeaderUnavailable", err)
	}
	if nodes, _ := shared.Nodes(context.Background()); len(nodes) != 0 {
		t.Errorf("a refused write left %d nodes", len(nodes))
	}
}

// TestTheLeaderRequiresTheCredential: a write without the replicas'
// credential is refused and writes nothing.
func TestTheLeaderRequiresTheCredential(t *testing.T) {
	shared := new(memstore.Store)
	srv := serve(t, shared, leading)
	for _, cred := range []string{"", leaderstore.Credential([]byte("another master's secret"))} {
		store, err := leaderstore.New(shared, leaderstore.Options{Leader: at(srv.URL), Credential: cred, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = store.ReserveNode(context.Background(), reservation())
		if err == nil || !strings.Contains(err.Error(), "401") || !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
			t.Errorf("credential %q: got %v, want the leader's refusal, as ErrLeaderUnavailable", cred, err)
		}
	}
	if nodes, _ := shared.Nodes(context.Background()); len(nodes) != 0 {
		t.Errorf("refused writes left %d nodes", len(nodes))
	}
	resp, err := http.Post(srv.URL+leaderstore.PathPrefix+"reserve_node", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a write without credential: %s, want 401", resp.Status)
	}
}

// dyingLeader serves writes with store, and dies (drops the connection)
// after writing each one, or before when beforeWriting.
func dyingLeader(t *testing.T, store joinkeys.Store, beforeWriting bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	inner := leaderstore.Handler(store, leaderstore.HandlerOptions{Credential: credential, Leading: leading})
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if !beforeWriting {
			inner.ServeHTTP(httptest.NewRecorder(), r) // written, then the leader dies
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &received
}

// TestALostAnswerIsNotTriedAgain: a write that reached the leader but
// whose answer was lost may have landed, so it is not sent again.
func TestALostAnswerIsNotTriedAgain(t *testing.T) {
	shared := new(memstore.Store)
	srv, received := dyingLeader(t, shared, false)
	ctx := context.Background()
	err := follower(t, shared, at(srv.URL)).AppendAudit(ctx, joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventKeyMinted, KeyID: "k1"})
	if !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
		t.Fatalf("got %v, want ErrLeaderUnavailable", err)
	}
	if received.Load() != 1 {
		t.Errorf("the leader received the write %d times, want once", received.Load())
	}
	if events, _ := shared.Audit(ctx, joinkeys.AuditQuery{}); len(events) != 1 {
		t.Errorf("the trail holds %d events, want the one that landed", len(events))
	}
}

// TestALostReservationIsFoundByItsToken: a reservation whose answer was
// lost is answered from the ledger when it landed (its node token's hash
// is there), and is ErrLeaderUnavailable when it did not.
func TestALostReservationIsFoundByItsToken(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			shared := new(memstore.Store)
			srv, received := dyingLeader(t, shared, !landed)
			r := reservation()
			r.Node.TokenHash = []byte("the hash of this reservation's new node token")
			n, err := follower(t, shared, at(srv.URL)).ReserveNode(context.Background(), r)
			switch {
			case landed && err != nil:
				t.Fatalf("the reservation landed, yet: %v", err)
			case landed && (n.Hostname != "gpu-1" || !n.VPNIP.IsValid()):
				t.Errorf("answered %+v, want the node as the leader wrote it", n)
			case !landed && !errors.Is(err, leaderstore.ErrLeaderUnavailable):
				t.Errorf("the reservation never landed; got %+v, %v, want ErrLeaderUnavailable", n, err)
			}
			if received.Load() != 1 {
				t.Errorf("the leader received the write %d times, want once", received.Load())
			}
		})
	}
	// Another machine's node under the hostname is not this reservation.
	shared := new(memstore.Store)
	other := reservation()
	other.Node.TokenHash = []byte("another machine's token hash")
	if _, err := shared.ReserveNode(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	srv, _ := dyingLeader(t, shared, true)
	r := reservation()
	r.Node.TokenHash = []byte("the hash of this reservation's new node token")
	if _, err := follower(t, shared, at(srv.URL)).ReserveNode(context.Background(), r); !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
		t.Errorf("another node holds the hostname; got %v, want ErrLeaderUnavailable", err)
	}
}

// TestAWriteSentOutlivesItsCaller: a reservation the leader was sent is
// answered as the leader answers it, even when the caller goes away
// while the leader writes: the leader finishes it (a key's use spent, a
// node reserved under a new token), so an error would leave it landed
// with a token nobody holds.
func TestAWriteSentOutlivesItsCaller(t *testing.T) {
	shared := new(memstore.Store)
	inner := leaderstore.Handler(shared, leaderstore.HandlerOptions{Credential: credential, Leading: leading})
	received, callerGone := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(received)
		<-callerGone
		inner.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context()))) // the leader writes once its caller left
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-received
		cancel()
		time.Sleep(50 * time.Millisecond) // the caller is gone before the write
		close(callerGone)
	}()
	r := reservation()
	r.Node.TokenHash = []byte("the hash of this reservation's new node token")
	n, err := follower(t, shared, at(srv.URL)).ReserveNode(ctx, r)
	if err != nil {
		t.Fatalf("the leader reserved the node, yet the follower answered: %v", err)
	}
	if stored, err := shared.Node(context.Background(), "gpu-1"); err != nil || stored.VPNIP != n.VPNIP {
		t.Errorf("the follower answered %+v; the ledger holds %+v (%v)", n, stored, err)
	}
}

// TestMalformedWrites are refused with 400 and write nothing.
func TestMalformedWrites(t *testing.T) {
	shared := new(memstore.Store)
	srv := serve(t, shared, leading)
	for _, body := range []string{`{`, `{"node":{},"prefix":"198.18.0.0/33"}`, `{"unknown":1}`} {
		req, _ := http.NewRequest("POST", srv.URL+leaderstore.PathPrefix+"reserve_node", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", body, resp.Status)
		}
	}
	if nodes, _ := shared.Nodes(context.Background()); len(nodes) != 0 {
		t.Errorf("malformed writes left %d nodes", len(nodes))
	}
}

// TestAWriteNotSentEndsWithItsCaller: a write still connecting to the
// leader (a dead leader's address that does not answer) ends when its
// caller does: nothing was sent, so nothing is waited for.
func TestAWriteNotSentEndsWithItsCaller(t *testing.T) {
	dialing := make(chan struct{}, 1)
	hanging := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dialing <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return nil, errors.New("the dial was not given up")
		}
	}}}
	s, err := leaderstore.New(new(memstore.Store), leaderstore.Options{Leader: at("http://198.18.0.9:1"), Credential: credential, Client: hanging, Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.AppendAudit(ctx, joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventKeyMinted, KeyID: "k1"})
	}()
	<-dialing
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
			t.Errorf("a write given up before it was sent: %v, want ErrLeaderUnavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write not yet sent outlived its caller")
	}
}

// TestARefusedChannelIsTheLedgerUnavailable: when the channel refuses a
// write before the leader's Store sees it (a credential the replicas do
// not share, a field this replica's version sends that the leader's does
// not know, a body over the bound), the follower answers
// ErrLeaderUnavailable, which the API answers 503, not an internal error.
func TestARefusedChannelIsTheLedgerUnavailable(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "refused", status)
		}))
		err := follower(t, new(memstore.Store), at(srv.URL)).AppendAudit(context.Background(), joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventKeyMinted, KeyID: "k1"})
		srv.Close()
		if !errors.Is(err, leaderstore.ErrLeaderUnavailable) {
			t.Errorf("the channel answered %d: %v, want ErrLeaderUnavailable", status, err)
		}
	}
}

// TestASilentLeaderIsReadAround: a read asked of a leader that takes the
// request and never answers is read from the replica's own Store once
// the read's wait (two seconds) is over: unlike a write, nothing of it
// is in flight.
func TestASilentLeaderIsReadAround(t *testing.T) {
	shared := new(memstore.Store)
	if err := shared.InsertKey(context.Background(), joinkeys.KeyRecord{Key: joinkeys.Key{ID: "k1", Org: "acme", Kind: joinkeys.KindOrg}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	read := make(chan error, 1)
	go func() {
		_, err := follower(t, shared, at(srv.URL)).Key(context.Background(), "k1")
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Errorf("the key read around a silent leader: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a read still waits for a leader that never answers")
	}
}

// TestFreshReadsAreTheLeaders: a key, a node by hostname and a node by
// public key are the leader's answers (its Store holds what it wrote
// last), not what this replica's own view of the ledger holds; its errors
// cross as a write's do. While no leader answers, the replica reads its
// own view.
func TestFreshReadsAreTheLeaders(t *testing.T) {
	ctx := context.Background()
	leaders, stale := new(memstore.Store), new(memstore.Store)
	for _, s := range []joinkeys.Store{leaders, stale} {
		if _, err := s.ReserveNode(ctx, reservation()); err != nil {
			t.Fatal(err)
		}
	}
	n, err := leaders.Node(ctx, "gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	n.Version = "2.0.0" // written by the leader since the replica's view was taken
	if n, err = leaders.UpdateNode(ctx, n, joinkeys.AuditEvent{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	key := joinkeys.KeyRecord{Key: joinkeys.Key{ID: "k1", Kind: joinkeys.KindOrg, Org: "acme", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, SecretHash: []byte("hash")}
	if err := leaders.InsertKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	var leads atomic.Bool
	leads.Store(true)
	store := follower(t, stale, at(serve(t, leaders, leads.Load).URL))

	if got, err := store.Node(ctx, "gpu-1"); err != nil || got.Version != "2.0.0" || got.Revision != n.Revision {
		t.Errorf("Node: %+v, %v; want the leader's (version 2.0.0, revision %d)", got, err, n.Revision)
	}
	if got, err := store.NodeByPublicKey(ctx, n.PublicKey); err != nil || got.Version != "2.0.0" {
		t.Errorf("NodeByPublicKey: %+v, %v; want the leader's", got, err)
	}
	if got, err := store.Key(ctx, "k1"); err != nil || got.ID != "k1" {
		t.Errorf("Key: %+v, %v; want the leader's k1", got, err)
	}
	if _, err := store.Node(ctx, "nowhere"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("Node of a hostname the leader does not hold: %v, want ErrNodeNotFound", err)
	}

	// The replica asked no longer leads: the replica's own view answers.
	leads.Store(false)
	if got, err := store.Node(ctx, "gpu-1"); err != nil || got.Version == "2.0.0" {
		t.Errorf("Node with no leader answering: %+v, %v; want the replica's own view", got, err)
	}
	if _, err := store.Key(ctx, "k1"); !errors.Is(err, joinkeys.ErrKeyNotFound) {
		t.Errorf("Key with no leader answering: %v; want the replica's own view (no such key)", err)
	}
}
