package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
)

// HookedStore wraps a Store so that a test can run code between a
// Keyring's read and its write, or right after a write, and it refuses
// audit writes under a cancelled context as a database driver does. Its
// hooks run once each.
type HookedStore struct {
	joinkeys.Store

	mu           sync.Mutex
	beforeUpdate func()
	afterWrite   func()
}

// BeforeNextUpdate makes f run once, just before the next UpdateNode
// reaches the store (after the Keyring read what it will write).
func (s *HookedStore) BeforeNextUpdate(f func()) { s.mu.Lock(); s.beforeUpdate = f; s.mu.Unlock() }

// AfterNextWrite makes f run once, just after the next successful
// InsertKey, RevokeKey, UpdateNode or DeleteNode.
func (s *HookedStore) AfterNextWrite(f func()) { s.mu.Lock(); s.afterWrite = f; s.mu.Unlock() }

func (s *HookedStore) take(hook *func()) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := *hook
	*hook = nil
	return f
}

func (s *HookedStore) wrote(err error) {
	if err != nil {
		return
	}
	if f := s.take(&s.afterWrite); f != nil {
		f()
	}
}

// InsertKey implements joinkeys.Store.
func (s *HookedStore) InsertKey(ctx context.Context, key joinkeys.KeyRecord) error {
	err := s.Store.InsertKey(ctx, key)
	s.wrote(err)
	return err
}

// RevokeKey implements joinkeys.Store.
func (s *HookedStore) RevokeKey(ctx context.Context, id string, at time.Time) (joinkeys.KeyRecord, error) {
	k, err := s.Store.RevokeKey(ctx, id, at)
	s.wrote(err)
	return k, err
}

// UpdateNode implements joinkeys.Store.
func (s *HookedStore) UpdateNode(ctx context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	if f := s.take(&s.beforeUpdate); f != nil {
		f()
	}
	rec, err := s.Store.UpdateNode(ctx, n, event)
	s.wrote(err)
	return rec, err
}

// DeleteNode implements joinkeys.Store.
func (s *HookedStore) DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	rec, err := s.Store.DeleteNode(ctx, hostname, revision, at)
	s.wrote(err)
	return rec, err
}

// AppendAudit implements joinkeys.Store.
func (s *HookedStore) AppendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("audit event %s not stored: %w", e.Type, err)
	}
	return s.Store.AppendAudit(ctx, e)
}

type hookedEnvFunc func(t *testing.T) (*joinkeys.Keyring, *HookedStore, *Clock)

var twoH100 = []joinkeys.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-1"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-2"}}

func join(t testing.TB, kr *joinkeys.Keyring, secret, hostname, pub string) joinkeys.JoinResult {
	t.Helper()
	j, err := kr.Join(context.Background(), joinkeys.JoinRequest{Key: secret, Hostname: hostname, PublicKey: pub})
	if err != nil {
		t.Fatalf("Join(%s): %v", hostname, err)
	}
	return j
}

// testKeyOnlyCompletesValidated: an org key is shared across a fleet, and
// a public key is no secret, so key + public key may only complete a
// reservation still in validated status.
func testKeyOnlyCompletesValidated(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	other := mint(t, kr, joinkeys.MintRequest{})
	pub := PublicKey(t)
	j := join(t, kr, m.Secret, "gpu-1", pub)

	// Another valid key of the fleet does not complete this reservation.
	if _, err := kr.Register(ctx, joinkeys.Registration{Key: other.Secret, Hostname: "gpu-1", PublicKey: pub, GPUs: twoH100}); !errors.Is(err, joinkeys.ErrNodeTokenRequired) {
		t.Errorf("register with another key of the org: %v, want ErrNodeTokenRequired", err)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{Key: m.Secret, Hostname: "gpu-1", PublicKey: pub, GPUs: twoH100}); err != nil {
		t.Fatalf("key + reserved public key completing the reservation: %v", err)
	}
	// From now on the key is not enough: it would let anyone holding the
	// org's key rewrite the node's GPUs.
	rewrite := joinkeys.Registration{Key: m.Secret, Hostname: "gpu-1", PublicKey: pub, GPUs: twoH100[:1]}
	_, err := kr.Register(ctx, rewrite)
	if !errors.Is(err, joinkeys.ErrNodeTokenRequired) || !strings.Contains(err.Error(), "node token") {
		t.Errorf("register with the key after registration: %v, want ErrNodeTokenRequired saying to present the node token", err)
	}
	if n, _ := kr.Node(ctx, "gpu-1"); len(n.GPUs) != 2 {
		t.Errorf("a refused registration changed the GPUs to %v", n.GPUs)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: twoH100[:1]}); err != nil {
		t.Errorf("register with the node token: %v", err)
	}
	if _, err := kr.MarkDisconnected(ctx, "gpu-1", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Register(ctx, rewrite); !errors.Is(err, joinkeys.ErrNodeTokenRequired) {
		t.Errorf("register with the key after a disconnect: %v, want ErrNodeTokenRequired", err)
	}
	// Re-validation needs the token too.
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-1", PublicKey: pub}); !errors.Is(err, joinkeys.ErrNodeTokenRequired) {
		t.Errorf("re-validate with the key alone: %v, want ErrNodeTokenRequired", err)
	}
	if _, err := kr.ReportVersion(ctx, "gpu-1", m.Secret, "2.0.0"); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("version report with the join key: %v, want ErrNodeTokenInvalid", err)
	}
}

func testPodCIDRs(t *testing.T, env envFunc) {
	ctx := context.Background()
	_, store, clock := env(t) // pool 198.18.0.0/16
	kr, err := joinkeys.New(store, &joinkeys.Options{
		JWTSecret:      Secret,
		Pool:           joinkeys.MustPool("198.18.0.0/16", "198.18.0.1"),
		Now:            clock.Now,
		MasterPrefixes: []netip.Prefix{netip.MustParsePrefix("10.43.0.0/16"), netip.MustParsePrefix("198.19.0.7/32")},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := mint(t, kr, joinkeys.MintRequest{})
	for _, h := range []string{"a", "b", "c"} {
		join(t, kr, m.Secret, h, PublicKey(t))
	}
	set := func(host, cidr string) error {
		_, err := kr.SetNodePodCIDR(ctx, host, netip.MustParsePrefix(cidr))
		return err
	}
	for _, c := range []struct{ host, cidr string }{{"a", "10.42.0.0/24"}, {"c", "fd00:42::/64"}, {"a", "10.42.0.0/24"}} {
		if err := set(c.host, c.cidr); err != nil {
			t.Fatalf("SetNodePodCIDR(%s, %s): %v", c.host, c.cidr, err)
		}
	}
	for _, c := range []struct{ cidr, holder, what string }{
		{"10.42.0.0/16", "a", `node "a"`},     // contains a's
		{"10.42.0.128/25", "a", `node "a"`},   // inside a's
		{"fd00:42::/56", "c", `node "c"`},     // IPv6, contains c's
		{"fd00:42::8/126", "c", `node "c"`},   // IPv6, inside c's
		{"198.18.3.0/24", "", "the VPN pool"}, // inside the pool
		{"198.0.0.0/8", "", "the VPN pool"},   // contains the pool
		{"10.43.5.0/24", "", "master's"},      // inside a master prefix
		{"198.19.0.0/24", "", "master's"},     // contains the master's address
	} {
		err := set("b", c.cidr)
		var conflict *joinkeys.PodCIDRConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, joinkeys.ErrPodCIDRConflict) || conflict.Hostname != c.holder || !strings.Contains(err.Error(), c.what) {
			t.Errorf("SetNodePodCIDR(b, %s) = %v; want a conflict naming %s", c.cidr, err, c.what)
		}
	}
	if n, _ := kr.Node(ctx, "b"); n.PodCIDR.IsValid() {
		t.Errorf("refused pod CIDRs left %s on b", n.PodCIDR)
	}
	if err := set("b", "10.42.1.0/24"); err != nil {
		t.Fatalf("a disjoint pod CIDR: %v", err)
	}
	// Released, a node's prefix is free again.
	if _, err := kr.Release(ctx, "a", "admin"); err != nil {
		t.Fatal(err)
	}
	if err := set("b", "10.42.0.0/23"); err != nil {
		t.Errorf("b taking the released prefix (and its own): %v", err)
	}
	if _, err := kr.SetNodePodCIDR(ctx, "b", netip.Prefix{}); err != nil {
		t.Errorf("clearing a pod CIDR: %v", err)
	}

	// Concurrent claims of one prefix: exactly one node gets it.
	const claimers = 12
	for i := range claimers {
		join(t, kr, m.Secret, fmt.Sprintf("claim-%d", i), PublicKey(t))
	}
	var wg sync.WaitGroup
	errs := make([]error, claimers)
	for i := range claimers {
		wg.Go(func() { errs[i] = set(fmt.Sprintf("claim-%d", i), "10.50.0.0/16") })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, joinkeys.ErrPodCIDRConflict):
			t.Errorf("claim-%d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d nodes got 10.50.0.0/16, want exactly 1", won)
	}
}

func testClockSkew(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	org := mint(t, kr, joinkeys.MintRequest{TTL: time.Hour})
	prov := mint(t, kr, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Provider: "p1", TTL: time.Hour})
	minted := clock.Now()

	// A replica whose clock is behind the minting one, within the leeway.
	clock.Advance(-30 * time.Second)
	if _, err := kr.Check(ctx, org.Secret); err != nil {
		t.Errorf("org key on a clock 30s behind: %v", err)
	}
	if _, err := kr.VerifyProvider(ctx, prov.Secret); err != nil {
		t.Errorf("provider key on a clock 30s behind: %v", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: prov.Secret, Hostname: "behind", PublicKey: PublicKey(t)}); err != nil {
		t.Errorf("join with a provider key on a clock 30s behind: %v", err)
	}
	// Beyond the leeway, both are not valid yet.
	clock.Advance(-2 * time.Minute)
	if _, err := kr.Check(ctx, org.Secret); !errors.Is(err, joinkeys.ErrKeyNotYetValid) {
		t.Errorf("org key 2.5 minutes early: %v, want ErrKeyNotYetValid", err)
	}
	if _, err := kr.VerifyProvider(ctx, prov.Secret); !errors.Is(err, joinkeys.ErrKeyNotYetValid) {
		t.Errorf("provider key 2.5 minutes early: %v, want ErrKeyNotYetValid", err)
	}
	// Expiry is exact for both kinds: valid a second before, expired at it.
	clock.Advance(minted.Add(time.Hour - time.Second).Sub(clock.Now()))
	if _, err := kr.Check(ctx, org.Secret); err != nil {
		t.Errorf("org key a second before expiry: %v", err)
	}
	if _, err := kr.VerifyProvider(ctx, prov.Secret); err != nil {
		t.Errorf("provider key a second before expiry: %v", err)
	}
	clock.Advance(time.Second)
	if _, err := kr.Check(ctx, org.Secret); !errors.Is(err, joinkeys.ErrKeyExpired) {
		t.Errorf("org key at its expiry: %v, want ErrKeyExpired", err)
	}
	if _, err := kr.VerifyProvider(ctx, prov.Secret); !errors.Is(err, joinkeys.ErrKeyExpired) {
		t.Errorf("provider key at its expiry: %v, want ErrKeyExpired", err)
	}
}

// testNoLostUpdates interleaves two writers of one node deterministically:
// the second write lands between the first one's read and its write.
func testNoLostUpdates(t *testing.T, env hookedEnvFunc) {
	ctx := context.Background()
	kr, store, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	j := join(t, kr, m.Secret, "gpu-1", PublicKey(t))

	// A registration lands while a disconnect is between read and write.
	store.BeforeNextUpdate(func() {
		if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: twoH100, Version: "1.1.0"}); err != nil {
			t.Errorf("register: %v", err)
		}
	})
	if _, err := kr.MarkDisconnected(ctx, "gpu-1", "admin"); err != nil {
		t.Fatal(err)
	}
	n, _ := kr.Node(ctx, "gpu-1")
	if n.Status != joinkeys.StatusDisconnected || len(n.GPUs) != 2 || n.Version != "1.1.0" || n.RegisteredAt.IsZero() {
		t.Errorf("after register inside a disconnect: %+v; want disconnected with the registration's GPUs, version and time", n)
	}

	// A disconnected node cannot register or re-join its way back: the
	// teardown that marked it must finish first.
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: twoH100}); !errors.Is(err, joinkeys.ErrNodeDisconnected) {
		t.Errorf("register of a disconnected node: %v, want ErrNodeDisconnected", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: j.NodeToken, Hostname: "gpu-1", PublicKey: n.PublicKey.String()}); !errors.Is(err, joinkeys.ErrNodeDisconnected) {
		t.Errorf("re-join of a disconnected node: %v, want ErrNodeDisconnected", err)
	}
	if _, err := kr.ReportVersion(ctx, "gpu-1", j.NodeToken, "1.3.0"); !errors.Is(err, joinkeys.ErrNodeDisconnected) {
		t.Errorf("version report of a disconnected node: %v, want ErrNodeDisconnected", err)
	}

	// And the other way round, on another node.
	j2 := join(t, kr, m.Secret, "gpu-2", PublicKey(t))
	store.BeforeNextUpdate(func() {
		if _, err := kr.ReportVersion(ctx, "gpu-2", j2.NodeToken, "1.2.0"); err != nil {
			t.Errorf("report version: %v", err)
		}
	})
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j2.NodeToken, Hostname: "gpu-2", GPUs: twoH100[:1]}); err != nil {
		t.Fatal(err)
	}
	n, _ = kr.Node(ctx, "gpu-2")
	if n.Status != joinkeys.StatusRegistered || len(n.GPUs) != 1 || n.Version != "1.2.0" {
		t.Errorf("after a version report inside a register: %+v; want registered, 1 GPU, version 1.2.0", n)
	}
}

// testStaleWriteAfterRelease: a write in flight while the node is released
// and a new machine takes the hostname must not land on the new machine's
// record (above all, not write the old token hash onto it).
func testStaleWriteAfterRelease(t *testing.T, env hookedEnvFunc) {
	ctx := context.Background()
	kr, store, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	oldPub := PublicKey(t)
	old := join(t, kr, m.Secret, "box", oldPub)
	newPub := PublicKey(t)
	var fresh joinkeys.JoinResult

	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"report version", func() error { _, err := kr.ReportVersion(ctx, "box", old.NodeToken, "9.9.9"); return err }},
		{"register", func() error {
			_, err := kr.Register(ctx, joinkeys.Registration{NodeToken: old.NodeToken, Hostname: "box", GPUs: twoH100, Version: "9.9.9"})
			return err
		}},
		{"re-join", func() error {
			_, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: old.NodeToken, Hostname: "box", PublicKey: oldPub, Version: "9.9.9"})
			return err
		}},
	} {
		store.BeforeNextUpdate(func() {
			if _, err := kr.Release(ctx, "box", "admin"); err != nil {
				t.Errorf("%s: release: %v", c.name, err)
			}
			fresh = join(t, kr, m.Secret, "box", newPub)
		})
		if err := c.write(); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) && !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
			t.Errorf("%s with the released node's token: %v, want ErrNodeTokenInvalid", c.name, err)
		}
		if _, err := kr.AuthenticateNode(ctx, "box", old.NodeToken); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
			t.Fatalf("%s: the released node's token authenticates the new machine: %v", c.name, err)
		}
		n, err := kr.AuthenticateNode(ctx, "box", fresh.NodeToken)
		if err != nil || n.PublicKey.String() != newPub || n.Version == "9.9.9" || len(n.GPUs) != 0 {
			t.Errorf("%s: the new machine's record %+v, %v; want it untouched", c.name, n, err)
		}
		// Put the old machine back for the next case.
		if _, err := kr.Release(ctx, "box", "admin"); err != nil {
			t.Fatal(err)
		}
		old = join(t, kr, m.Secret, "box", oldPub)
	}
}

func testReleaseIfUnchanged(t *testing.T, env hookedEnvFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	j := join(t, kr, m.Secret, "slow", PublicKey(t))
	seen, _ := kr.Node(ctx, "slow")
	if seen.Revision == 0 || seen.Revision != j.Node.Revision {
		t.Fatalf("revision %d read, %d from the join", seen.Revision, j.Node.Revision)
	}
	// The node registered after all: a release based on the old read fails.
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "slow"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.ReleaseIfUnchanged(ctx, seen, "reaper", "never registered"); !errors.Is(err, joinkeys.ErrNodeChanged) {
		t.Errorf("ReleaseIfUnchanged of a stale read: %v, want ErrNodeChanged", err)
	}
	if _, err := kr.Node(ctx, "slow"); err != nil {
		t.Fatalf("the node was released anyway: %v", err)
	}
	now, _ := kr.Node(ctx, "slow")
	if now.Revision <= seen.Revision {
		t.Errorf("revision went from %d to %d", seen.Revision, now.Revision)
	}
	if _, err := kr.ReleaseIfUnchanged(ctx, now, "reaper", "test"); err != nil {
		t.Errorf("ReleaseIfUnchanged of a fresh read: %v", err)
	}
	events, _ := kr.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventNodeReleased})
	if len(events) != 1 || events[0].Actor != "reaper" || !strings.Contains(events[0].Reason, "test") {
		t.Errorf("release audit %+v", events)
	}
}

// testAuditSurvivesCancel: the client goes away (its context is cancelled)
// right after the action was stored; the audit event is still written.
func testAuditSurvivesCancel(t *testing.T, env hookedEnvFunc) {
	kr, store, _ := env(t)
	bg := context.Background()
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(bg)
		store.AfterNextWrite(cancel)
		return ctx
	}
	m, err := kr.Mint(cancelled(), joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j := join(t, kr, m.Secret, "n1", PublicKey(t))
	if _, err := kr.Register(cancelled(), joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.MarkDisconnected(cancelled(), "n1", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(cancelled(), "n1", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Revoke(cancelled(), m.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	events, err := kr.Audit(bg, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, string(e.Type))
	}
	want := "key_minted validation_accepted node_registered node_disconnected node_released key_revoked"
	if strings.Join(types, " ") != want {
		t.Errorf("audit trail after cancelled requests\n got %s\nwant %s", strings.Join(types, " "), want)
	}
}

// testConcurrentWriters races registrations, disconnects, version reports
// and a release with a new machine taking the hostname (run with -race).
func testConcurrentWriters(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	oldPub := PublicKey(t)
	old := join(t, kr, m.Secret, "hot", oldPub)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unexpected []error
	note := func(err error) {
		if err == nil || errors.Is(err, joinkeys.ErrNodeTokenInvalid) || errors.Is(err, joinkeys.ErrNodeNotFound) || errors.Is(err, joinkeys.ErrNodeChanged) || errors.Is(err, joinkeys.ErrNodeDisconnected) {
			return
		}
		mu.Lock()
		unexpected = append(unexpected, err)
		mu.Unlock()
	}
	for i := range 10 {
		wg.Go(func() {
			_, err := kr.Register(ctx, joinkeys.Registration{NodeToken: old.NodeToken, Hostname: "hot", GPUs: twoH100[:1+i%2]})
			note(err)
		})
		wg.Go(func() { _, err := kr.MarkDisconnected(ctx, "hot", "admin"); note(err) })
		wg.Go(func() { _, err := kr.ReportVersion(ctx, "hot", old.NodeToken, fmt.Sprintf("1.%d.0", i)); note(err) })
	}
	newPub := PublicKey(t)
	var fresh joinkeys.JoinResult
	wg.Go(func() {
		if _, err := kr.Release(ctx, "hot", "admin"); err != nil {
			note(err)
			return
		}
		var err error
		fresh, err = kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "hot", PublicKey: newPub})
		note(err)
	})
	wg.Wait()
	for _, err := range unexpected {
		t.Errorf("unexpected error: %v", err)
	}
	if _, err := kr.AuthenticateNode(ctx, "hot", old.NodeToken); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Fatalf("the released machine's token still authenticates: %v", err)
	}
	n, err := kr.AuthenticateNode(ctx, "hot", fresh.NodeToken)
	if err != nil || n.PublicKey.String() != newPub {
		t.Fatalf("the new machine's record %+v, %v", n, err)
	}
	if len(n.GPUs) != 0 || n.Status != joinkeys.StatusValidated && n.Status != joinkeys.StatusDisconnected {
		t.Errorf("the old machine's writes reached the new record: %+v", n)
	}
}
