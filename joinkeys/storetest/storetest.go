package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// Secret is the JWT secret the suite's keyrings use.
var Secret = []byte("storetest-secret-0123456789abcdef0123456789")

// Clock is a settable clock for tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Run runs the conformance suite. newStore returns a new, empty store for
// each subtest; Run closes it.
func Run(t *testing.T, newStore func(t *testing.T) joinkeys.Store) {
	env := func(t *testing.T, pool string, reserved ...string) (*joinkeys.Keyring, joinkeys.Store, *Clock) {
		t.Helper()
		store := newStore(t)
		t.Cleanup(func() { store.Close() })
		clock := NewClock()
		kr, err := joinkeys.New(store, &joinkeys.Options{
			JWTSecret: Secret,
			Pool:      joinkeys.MustPool(pool, reserved...),
			Now:       clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return kr, store, clock
	}
	big := func(t *testing.T) (*joinkeys.Keyring, joinkeys.Store, *Clock) {
		return env(t, "198.18.0.0/16", "198.18.0.1")
	}

	t.Run("OrgKeyLifecycle", func(t *testing.T) { testOrgKeyLifecycle(t, big) })
	t.Run("ProviderKeys", func(t *testing.T) { testProviderKeys(t, big) })
	t.Run("ExpiryWithInjectedClock", func(t *testing.T) { testExpiry(t, big) })
	t.Run("MaxUsesUnderConcurrency", func(t *testing.T) { testMaxUses(t, big) })
	t.Run("UndoJoinGivesTheUseBack", func(t *testing.T) { testUndoJoin(t, big) })
	t.Run("ParallelReservationsGetDistinctAddresses", func(t *testing.T) { testParallelReservations(t, big) })
	t.Run("HostnameRaceHasOneWinner", func(t *testing.T) { testHostnameRace(t, big) })
	t.Run("RejoinKeepsAddress", func(t *testing.T) { testRejoin(t, big) })
	t.Run("PoolExhaustion", func(t *testing.T) {
		testPoolExhaustion(t, func(t *testing.T) (*joinkeys.Keyring, joinkeys.Store, *Clock) {
			return env(t, "198.18.5.0/29", "198.18.5.1")
		})
	})
	t.Run("ReleaseAndReuse", func(t *testing.T) { testReleaseAndReuse(t, big) })
	t.Run("NodesPage", func(t *testing.T) { testNodesPage(t, big) })
	t.Run("GPUKinds", func(t *testing.T) { testGPUKinds(t, big) })
	t.Run("BadInputWritesNothing", func(t *testing.T) { testBadInput(t, big) })
	t.Run("RegisterAndReports", func(t *testing.T) { testRegister(t, big) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, big) })
	t.Run("AuditIsPrunedToItsBounds", func(t *testing.T) { testPruneAudit(t, big) })
	t.Run("KeyOnlyCompletesAValidatedReservation", func(t *testing.T) { testKeyOnlyCompletesValidated(t, big) })
	t.Run("PodCIDRsNeverOverlap", func(t *testing.T) { testPodCIDRs(t, big) })
	t.Run("ClockSkewLeewayButExactExpiry", func(t *testing.T) { testClockSkew(t, big) })
	hooked := func(t *testing.T) (*joinkeys.Keyring, *HookedStore, *Clock) {
		t.Helper()
		store := &HookedStore{Store: newStore(t)}
		t.Cleanup(func() { store.Close() })
		clock := NewClock()
		kr, err := joinkeys.New(store, &joinkeys.Options{
			JWTSecret: Secret,
			Pool:      joinkeys.MustPool("198.18.0.0/16", "198.18.0.1"),
			Now:       clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return kr, store, clock
	}
	t.Run("NoLostUpdates", func(t *testing.T) { testNoLostUpdates(t, hooked) })
	t.Run("StaleWriteNeverRevivesAnOldToken", func(t *testing.T) { testStaleWriteAfterRelease(t, hooked) })
	t.Run("ReleaseIfUnchanged", func(t *testing.T) { testReleaseIfUnchanged(t, hooked) })
	t.Run("AuditSurvivesACancelledRequest", func(t *testing.T) { testAuditSurvivesCancel(t, hooked) })
	t.Run("ConcurrentWritersRace", func(t *testing.T) { testConcurrentWriters(t, big) })
}

type envFunc func(t *testing.T) (*joinkeys.Keyring, joinkeys.Store, *Clock)

// PublicKey returns a fresh WireGuard public key in base64.
func PublicKey(t testing.TB) string {
	t.Helper()
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	return pub.String()
}

func mint(t testing.TB, kr *joinkeys.Keyring, req joinkeys.MintRequest) joinkeys.MintedKey {
	t.Helper()
	if req.Kind == "" {
		req.Kind = joinkeys.KindOrg
	}
	if req.Org == "" {
		req.Org = "acme"
	}
	if req.TTL == 0 {
		req.TTL = time.Hour
	}
	m, err := kr.Mint(context.Background(), req)
	if err != nil {
		t.Fatalf("Mint(%+v): %v", req, err)
	}
	return m
}

func testOrgKeyLifecycle(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	m := mint(t, kr, joinkeys.MintRequest{Labels: map[string]string{"team": "ml"}, CreatedBy: "admin"})
	if !strings.HasPrefix(m.Secret, "gwk_"+m.ID+"_") {
		t.Fatalf("org key %q does not carry its id %s", m.Secret, m.ID)
	}
	got, err := kr.Check(ctx, m.Secret)
	if err != nil || got.ID != m.ID || got.Org != "acme" {
		t.Fatalf("Check = %+v, %v", got, err)
	}
	// Wrong secret with the right id, malformed keys: one opaque error.
	wrong := m.Secret[:len(m.Secret)-1] + flipHex(m.Secret[len(m.Secret)-1])
	for _, bad := range []string{wrong, "gwk_short", "", "hello", strings.ToUpper(m.Secret), m.Secret + "0"} {
		if _, err := kr.Check(ctx, bad); !errors.Is(err, joinkeys.ErrKeyInvalid) {
			t.Errorf("Check(%q) = %v, want ErrKeyInvalid", bad, err)
		}
	}
	keys, err := kr.Keys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("Keys = %v, %v", keys, err)
	}
	k := keys[0]
	if k.Labels["team"] != "ml" || k.CreatedBy != "admin" || k.Kind != joinkeys.KindOrg || !k.ExpiresAt.Equal(clock.Now().Truncate(time.Second).Add(time.Hour)) {
		t.Errorf("listed key = %+v", k)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-a", PublicKey: PublicKey(t)}); err != nil {
		t.Fatal(err)
	}
	k, _ = kr.Key(ctx, m.ID)
	if k.Uses != 1 || !k.LastUsed.Equal(clock.Now()) {
		t.Errorf("after one join: uses %d, last used %v; want 1, %v", k.Uses, k.LastUsed, clock.Now())
	}
	// Keys are reusable until they expire.
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-b", PublicKey: PublicKey(t)}); err != nil {
		t.Fatalf("second machine with the same key: %v", err)
	}
	if _, err := kr.Revoke(ctx, m.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Check(ctx, m.Secret); !errors.Is(err, joinkeys.ErrKeyRevoked) {
		t.Errorf("Check after revoke = %v, want ErrKeyRevoked", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-c", PublicKey: PublicKey(t)}); !errors.Is(err, joinkeys.ErrKeyRevoked) {
		t.Errorf("Join after revoke = %v, want ErrKeyRevoked", err)
	}
	if _, err := kr.Revoke(ctx, "000000000000", "admin"); !errors.Is(err, joinkeys.ErrKeyNotFound) {
		t.Errorf("Revoke(unknown) = %v, want ErrKeyNotFound", err)
	}
}

func flipHex(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func testProviderKeys(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, store, clock := env(t)
	m := mint(t, kr, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Provider: "lambda-labs", TTL: 24 * time.Hour})
	p, err := kr.VerifyProvider(ctx, m.Secret)
	if err != nil || p.Name != "lambda-labs" || p.Org != "acme" || p.KeyID != m.ID {
		t.Fatalf("VerifyProvider = %+v, %v", p, err)
	}
	// The provider key is also a join key.
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "lambda-1", PublicKey: PublicKey(t)}); err != nil {
		t.Fatalf("join with provider key: %v", err)
	}

	now := clock.Now()
	claims := jwt.MapClaims{
		"iss": "gridweave", "aud": []string{"gridweave-join"}, "sub": "lambda-labs", "org": "acme",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": m.ID,
	}
	sign := func(method jwt.SigningMethod, c jwt.MapClaims, key any) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range claims {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	good := sign(jwt.SigningMethodHS256, claims, Secret)
	if _, err := kr.VerifyProvider(ctx, good); err != nil {
		t.Fatalf("hand-made valid token rejected: %v", err)
	}
	parts := strings.Split(good, ".")
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"gridweave","aud":["gridweave-join"],"sub":"evil","org":"acme","exp":9999999999,"jti":"`+m.ID+`"}`)) + "." + parts[2]

	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"alg none", noneHeader + "." + parts[1] + ".", joinkeys.ErrKeyInvalid},
		{"HS512 with the same secret", sign(jwt.SigningMethodHS512, claims, Secret), joinkeys.ErrKeyInvalid},
		{"HS384 with the same secret", sign(jwt.SigningMethodHS384, claims, Secret), joinkeys.ErrKeyInvalid},
		{"bad signature", sign(jwt.SigningMethodHS256, claims, []byte("another-secret-0123456789abcdef0123")), joinkeys.ErrKeyInvalid},
		{"tampered payload", tampered, joinkeys.ErrKeyInvalid},
		{"expired", sign(jwt.SigningMethodHS256, with("exp", now.Add(-time.Second).Unix()), Secret), joinkeys.ErrKeyExpired},
		{"no expiry", sign(jwt.SigningMethodHS256, with("exp", nil), Secret), joinkeys.ErrKeyInvalid},
		{"not yet valid", sign(jwt.SigningMethodHS256, with("nbf", now.Add(time.Hour).Unix()), Secret), joinkeys.ErrKeyNotYetValid},
		{"issued in the future", sign(jwt.SigningMethodHS256, with("iat", now.Add(time.Hour).Unix()), Secret), joinkeys.ErrKeyNotYetValid},
		{"wrong issuer", sign(jwt.SigningMethodHS256, with("iss", "someone-else"), Secret), joinkeys.ErrKeyInvalid},
		{"wrong audience", sign(jwt.SigningMethodHS256, with("aud", []string{"other"}), Secret), joinkeys.ErrKeyInvalid},
		{"unknown jti", sign(jwt.SigningMethodHS256, with("jti", "ffffffffffff"), Secret), joinkeys.ErrKeyInvalid},
		{"subject not the key's", sign(jwt.SigningMethodHS256, with("sub", "other-provider"), Secret), joinkeys.ErrKeyInvalid},
		{"garbage", "a.b.c", joinkeys.ErrKeyInvalid},
	}
	for _, c := range cases {
		if _, err := kr.VerifyProvider(ctx, c.token); !errors.Is(err, c.want) {
			t.Errorf("%s: VerifyProvider = %v, want %v", c.name, err, c.want)
		}
	}
	// An org key is not a provider token.
	org := mint(t, kr, joinkeys.MintRequest{})
	if _, err := kr.VerifyProvider(ctx, org.Secret); !errors.Is(err, joinkeys.ErrKeyInvalid) {
		t.Errorf("VerifyProvider(org key) = %v, want ErrKeyInvalid", err)
	}
	if _, err := kr.Revoke(ctx, m.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.VerifyProvider(ctx, m.Secret); !errors.Is(err, joinkeys.ErrKeyRevoked) {
		t.Errorf("VerifyProvider after revoke = %v, want ErrKeyRevoked", err)
	}
	rec, err := store.Key(ctx, m.ID)
	if err != nil || len(rec.SecretHash) != 0 || rec.Kind != joinkeys.KindProvider || rec.Provider != "lambda-labs" {
		t.Errorf("stored provider key = %+v, %v", rec, err)
	}
}

func testExpiry(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	org := mint(t, kr, joinkeys.MintRequest{TTL: time.Hour})
	prov := mint(t, kr, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Provider: "p1", TTL: time.Hour})
	clock.Advance(59 * time.Minute)
	if _, err := kr.Check(ctx, org.Secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	clock.Advance(2 * time.Minute)
	if _, err := kr.Check(ctx, org.Secret); !errors.Is(err, joinkeys.ErrKeyExpired) {
		t.Errorf("org key after expiry: %v, want ErrKeyExpired", err)
	}
	if _, err := kr.VerifyProvider(ctx, prov.Secret); !errors.Is(err, joinkeys.ErrKeyExpired) {
		t.Errorf("provider key after expiry: %v, want ErrKeyExpired", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: org.Secret, Hostname: "late", PublicKey: PublicKey(t)}); !errors.Is(err, joinkeys.ErrKeyExpired) {
		t.Errorf("Join with expired key: %v, want ErrKeyExpired", err)
	}
}

func testMaxUses(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{MaxUses: 10})
	const racers = 50
	var ok, exhausted atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for i := range racers {
		wg.Go(func() {
			_, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("m-%d", i), PublicKey: PublicKey(t)})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, joinkeys.ErrKeyExhausted):
				exhausted.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	if ok.Load() != 10 || exhausted.Load() != racers-10 {
		t.Fatalf("%d joins succeeded and %d were refused as exhausted; want 10 and %d", ok.Load(), exhausted.Load(), racers-10)
	}
	k, _ := kr.Key(ctx, m.ID)
	if k.Uses != 10 {
		t.Errorf("key uses = %d, want 10", k.Uses)
	}
	nodes, _ := kr.Nodes(ctx)
	if len(nodes) != 10 {
		t.Errorf("%d nodes stored, want 10", len(nodes))
	}
}

// testUndoJoin: a first join undone (its peer refused further on) gives
// its node and its key's use back, so a one-use key admits the machine
// when it tries again; a use is never given back below zero.
func testUndoJoin(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, store, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{MaxUses: 1})
	pub := PublicKey(t)
	j := join(t, kr, m.Secret, "undone", pub)
	if k, _ := kr.Key(ctx, m.ID); k.Uses != 1 {
		t.Fatalf("key uses %d after the join, want 1", k.Uses)
	}
	if err := kr.UndoJoin(ctx, j.Node, "gridweave", "the mesh refused the peer"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Node(ctx, "undone"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("the undone join's node: %v, want ErrNodeNotFound", err)
	}
	if k, _ := kr.Key(ctx, m.ID); k.Uses != 0 {
		t.Errorf("key uses %d after the undo, want 0", k.Uses)
	}
	again := join(t, kr, m.Secret, "undone", pub)
	if again.Node.JoinKeyID != m.ID {
		t.Errorf("the second try joined with key %q, want %q", again.Node.JoinKeyID, m.ID)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "other", PublicKey: PublicKey(t)}); !errors.Is(err, joinkeys.ErrKeyExhausted) {
		t.Errorf("a third join with the one-use key: %v, want ErrKeyExhausted", err)
	}
	for range 2 {
		if _, err := store.ReturnKeyUse(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	if k, _ := kr.Key(ctx, m.ID); k.Uses != 0 {
		t.Errorf("key uses %d after giving back two uses of one, want 0", k.Uses)
	}
	if _, err := store.ReturnKeyUse(ctx, "000000000000"); !errors.Is(err, joinkeys.ErrKeyNotFound) {
		t.Errorf("ReturnKeyUse of no key: %v, want ErrKeyNotFound", err)
	}
}

func testParallelReservations(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	const n = 500
	keys := make([]string, n)
	for i := range keys {
		keys[i] = PublicKey(t)
	}
	results := make([]joinkeys.JoinResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("node-%03d", i), PublicKey: keys[i]})
		})
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	pool := kr.Pool()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("reservation %d: %v", i, errs[i])
		}
		ip := r.Node.VPNIP
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s given to both %s and %s", ip, other, r.Node.Hostname)
		}
		seen[ip] = r.Node.Hostname
		if !pool.Prefix().Contains(ip) || ip == pool.Prefix().Addr() || ip == netip.MustParseAddr("198.18.0.1") || ip == netip.MustParseAddr("198.18.255.255") {
			t.Fatalf("%s is not an allocatable address of %s", ip, pool.Prefix())
		}
	}
	nodes, err := kr.Nodes(ctx)
	if err != nil || len(nodes) != n {
		t.Fatalf("Nodes = %d, %v; want %d", len(nodes), err, n)
	}
}

func testHostnameRace(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	const racers = 50
	secrets := make([]string, racers)
	pubs := make([]string, racers)
	for i := range racers {
		secrets[i] = mint(t, kr, joinkeys.MintRequest{}).Secret
		pubs[i] = PublicKey(t)
	}
	var wins atomic.Int32
	var taken []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			_, err := kr.Join(ctx, joinkeys.JoinRequest{Key: secrets[i], Hostname: "contested", PublicKey: pubs[i]})
			if err == nil {
				wins.Add(1)
				return
			}
			mu.Lock()
			taken = append(taken, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racers won the hostname, want exactly 1", wins.Load())
	}
	winner, err := kr.Node(ctx, "contested")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range taken {
		var ht *joinkeys.HostnameTakenError
		if !errors.As(err, &ht) || !errors.Is(err, joinkeys.ErrHostnameTaken) {
			t.Fatalf("loser got %v, want *HostnameTakenError", err)
		}
		if ht.Existing.PublicKey != winner.PublicKey || ht.Existing.VPNIP != winner.VPNIP {
			t.Fatalf("error names %v, want the winner %v", ht.Existing, winner)
		}
	}
}

func testRejoin(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	m := mint(t, kr, joinkeys.MintRequest{TTL: time.Hour})
	pub := PublicKey(t)
	first, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "box", PublicKey: pub, Version: "1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.NodeToken, "gwn_") || first.Rejoined {
		t.Fatalf("first join result %+v", first)
	}
	// A key alone is not proof of identity.
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "box", PublicKey: pub}); !errors.Is(err, joinkeys.ErrNodeTokenRequired) {
		t.Errorf("re-join without token: %v, want ErrNodeTokenRequired", err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: "gwn_" + strings.Repeat("0", 64), Hostname: "box", PublicKey: pub}); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("re-join with a wrong token: %v, want ErrNodeTokenInvalid", err)
	}
	// After the key expired, the token still re-joins, to the same address.
	clock.Advance(2 * time.Hour)
	again, err := kr.Join(ctx, joinkeys.JoinRequest{NodeToken: first.NodeToken, Hostname: "box", PublicKey: pub, Version: "1.3.0"})
	if err != nil {
		t.Fatalf("re-join after key expiry: %v", err)
	}
	if again.Node.VPNIP != first.Node.VPNIP || !again.Rejoined || again.Node.Version != "1.3.0" {
		t.Errorf("re-join = %+v; want the same address %s", again.Node, first.Node.VPNIP)
	}
	// The same public key under another hostname is refused.
	fresh := mint(t, kr, joinkeys.MintRequest{})
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: fresh.Secret, Hostname: "box-renamed", PublicKey: pub}); !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
		t.Errorf("same public key, new hostname: %v, want ErrPublicKeyTaken", err)
	}
	// A different machine cannot take the hostname.
	_, err = kr.Join(ctx, joinkeys.JoinRequest{Key: fresh.Secret, Hostname: "box", PublicKey: PublicKey(t)})
	var ht *joinkeys.HostnameTakenError
	if !errors.As(err, &ht) || ht.Existing.VPNIP != first.Node.VPNIP {
		t.Errorf("other machine, same hostname: %v, want *HostnameTakenError naming %s", err, first.Node.VPNIP)
	}
	if n, err := kr.AuthenticateNode(ctx, "box", first.NodeToken); err != nil || n.PublicKey.String() != pub {
		t.Errorf("AuthenticateNode = %+v, %v", n, err)
	}
}

func testPoolExhaustion(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t) // 198.18.5.0/29 with .1 reserved: .2-.6 are for nodes
	if got := kr.Pool().Size(); got != 5 {
		t.Fatalf("pool size %d, want 5", got)
	}
	m := mint(t, kr, joinkeys.MintRequest{MaxUses: 100, TTL: 48 * time.Hour})
	var got []string
	for i := range 5 {
		r, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("n%d", i), PublicKey: PublicKey(t)})
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
		got = append(got, r.Node.VPNIP.String())
	}
	want := "198.18.5.2 198.18.5.3 198.18.5.4 198.18.5.5 198.18.5.6"
	if strings.Join(got, " ") != want {
		t.Errorf("addresses %v, want %s", got, want)
	}
	_, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "one-too-many", PublicKey: PublicKey(t)})
	if !errors.Is(err, joinkeys.ErrPoolExhausted) || !strings.Contains(err.Error(), "198.18.5.0/29") {
		t.Fatalf("sixth join: %v, want ErrPoolExhausted naming the prefix", err)
	}
	// The failed reservation spent nothing and wrote no node.
	k, _ := kr.Key(ctx, m.ID)
	if k.Uses != 5 {
		t.Errorf("key uses %d after a failed reservation, want 5", k.Uses)
	}
	if _, err := kr.Node(ctx, "one-too-many"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("failed reservation left a node: %v", err)
	}
	// Freeing one address makes room again, once it has rested.
	if _, err := kr.Release(ctx, "n2", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "one-too-many", PublicKey: PublicKey(t)}); !errors.Is(err, joinkeys.ErrPoolExhausted) {
		t.Fatalf("a join while the only free address rests: %v, want ErrPoolExhausted", err)
	}
	clock.Advance(joinkeys.DefaultAddressQuarantine + time.Second)
	r, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "one-too-many", PublicKey: PublicKey(t)})
	if err != nil || r.Node.VPNIP.String() != "198.18.5.4" {
		t.Fatalf("after release and rest: %+v, %v; want 198.18.5.4", r.Node, err)
	}
}

// testGPUKinds: the registered nodes with GPUs are counted by kind (an
// empty vendor is NVIDIA's); validated, CPU-only and released nodes are
// not, and a node that changes its GPUs moves to its new kind.
func testGPUKinds(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	gpus := func(vendor, model string, n int) []joinkeys.GPU {
		out := make([]joinkeys.GPU, n)
		for i := range out {
			out[i] = joinkeys.GPU{Index: i, Vendor: vendor, Name: model, MemoryMiB: 1}
		}
		return out
	}
	tokens := map[string]string{}
	join := func(host string, g []joinkeys.GPU, register bool) {
		t.Helper()
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: host, PublicKey: PublicKey(t), Version: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		tokens[host] = j.NodeToken
		if register {
			if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: host, GPUs: g, Version: "1.0.0"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	join("h1", gpus("nvidia", "H100", 8), true)
	join("h2", gpus("", "H100", 8), true) // recorded before AMD support: NVIDIA's
	join("h3", gpus("nvidia", "H100", 4), true)
	join("m1", gpus("amd", "MI300X", 8), true)
	join("cpu", nil, true)
	join("pending", gpus("nvidia", "H100", 8), false)
	want := func(expect map[joinkeys.GPUKind]bool) {
		t.Helper()
		got, err := kr.GPUKinds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[joinkeys.GPUKind]bool{}
		for _, k := range got {
			seen[k] = true
		}
		if len(seen) != len(got) || !maps.Equal(seen, expect) {
			t.Errorf("GPUKinds = %+v, want %+v", got, expect)
		}
	}
	want(map[joinkeys.GPUKind]bool{
		{Vendor: "nvidia", Model: "H100", GPUs: 8, Nodes: 2}: true,
		{Vendor: "nvidia", Model: "H100", GPUs: 4, Nodes: 1}: true,
		{Vendor: "amd", Model: "MI300X", GPUs: 8, Nodes: 1}:  true,
	})
	// h3 gets 8 GPUs; h1 goes.
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: tokens["h3"], Hostname: "h3", GPUs: gpus("nvidia", "H100", 8), Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "h1", "admin"); err != nil {
		t.Fatal(err)
	}
	want(map[joinkeys.GPUKind]bool{
		{Vendor: "nvidia", Model: "H100", GPUs: 8, Nodes: 2}: true,
		{Vendor: "amd", Model: "MI300X", GPUs: 8, Nodes: 1}:  true,
	})
}

// testNodesPage: pages of nodes, in hostname order, add up to Nodes,
// whatever the page size, and a page after a hostname that is gone starts
// at the next one.
func testNodesPage(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	for _, h := range []string{"n-7", "n-1", "n-4", "n-10", "n-2", "n-9", "n-3"} {
		if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: h, PublicKey: PublicKey(t)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := kr.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 3, 7, 8, 100} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			page, next, err := kr.NodesPage(ctx, after, size)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > size || pages > len(all) {
				t.Fatalf("page size %d: a page of %d, or %d pages", size, len(page), pages)
			}
			for _, n := range page {
				got = append(got, n.Hostname)
			}
			if next == "" {
				break
			}
			after = next
		}
		var want []string
		for _, n := range all {
			want = append(want, n.Hostname)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("pages of %d: %v, want %v", size, got, want)
		}
	}
	if _, err := kr.Release(ctx, "n-3", "admin"); err != nil {
		t.Fatal(err)
	}
	page, _, err := kr.NodesPage(ctx, "n-3", 1)
	if err != nil || len(page) != 1 || page[0].Hostname != "n-4" {
		t.Errorf("the page after a released hostname: %+v, %v; want n-4", page, err)
	}
	if _, _, err := kr.NodesPage(ctx, "", 0); !errors.Is(err, joinkeys.ErrInvalidInput) {
		t.Errorf("a page of 0: %v, want ErrInvalidInput", err)
	}
}

func testReleaseAndReuse(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	m := mint(t, kr, joinkeys.MintRequest{TTL: 48 * time.Hour})
	a, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "a", PublicKey: PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "b", PublicKey: PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	released, err := kr.Release(ctx, "a", "admin")
	if err != nil || released.VPNIP != a.Node.VPNIP {
		t.Fatalf("Release = %+v, %v", released, err)
	}
	if _, err := kr.Release(ctx, "a", "admin"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("second Release = %v, want ErrNodeNotFound", err)
	}
	// The hostname is free for a new machine at once; the freed address
	// rests (a machine whose link service was down may still take it for
	// the departed node's), so the new machine gets another.
	c, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "a", PublicKey: PublicKey(t)})
	if err != nil {
		t.Fatalf("reusing the hostname: %v", err)
	}
	if c.Node.VPNIP == a.Node.VPNIP || c.Node.VPNIP == b.Node.VPNIP {
		t.Fatalf("a new node got %s at once; the freed %s rests and %s is b's", c.Node.VPNIP, a.Node.VPNIP, b.Node.VPNIP)
	}
	// Past the quarantine it is handed out again (the lowest free).
	clock.Advance(joinkeys.DefaultAddressQuarantine + time.Second)
	d, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "d", PublicKey: PublicKey(t)})
	if err != nil || d.Node.VPNIP != a.Node.VPNIP {
		t.Errorf("a node after the quarantine got %s (%v), want the freed %s", d.Node.VPNIP, err, a.Node.VPNIP)
	}
	// The old token no longer works.
	if _, err := kr.AuthenticateNode(ctx, "a", a.NodeToken); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("old token after release: %v", err)
	}
}

func testBadInput(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, store, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	pub := PublicKey(t)
	cases := []struct {
		req   joinkeys.JoinRequest
		field string
	}{
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "Bad_Host", PublicKey: pub}, "hostname"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "", PublicKey: pub}, "hostname"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "-lead", PublicKey: pub}, "hostname"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: strings.Repeat("a", 64), PublicKey: pub}, "hostname"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "ok", PublicKey: "not-base64!"}, "public_key"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "ok", PublicKey: base64.StdEncoding.EncodeToString(make([]byte, 31))}, "public_key"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "ok", PublicKey: ""}, "public_key"},
		{joinkeys.JoinRequest{Key: m.Secret, Hostname: "ok", PublicKey: pub, Version: "1 2"}, "version"},
		{joinkeys.JoinRequest{Hostname: "ok", PublicKey: pub}, "key"},
	}
	for _, c := range cases {
		_, err := kr.Join(ctx, c.req)
		var fe *joinkeys.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, joinkeys.ErrInvalidInput) {
			t.Errorf("Join(%+v) = %v, want a FieldError for %s", c.req, err, c.field)
		}
	}
	mintCases := []struct {
		req   joinkeys.MintRequest
		field string
	}{
		{joinkeys.MintRequest{Kind: "other", Org: "a", TTL: time.Hour}, "kind"},
		{joinkeys.MintRequest{Kind: joinkeys.KindOrg, TTL: time.Hour}, "org"},
		{joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "a"}, "ttl_seconds"},
		{joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "a", TTL: time.Hour, MaxUses: -1}, "max_uses"},
		{joinkeys.MintRequest{Kind: joinkeys.KindProvider, Org: "a", TTL: time.Hour}, "provider"},
		{joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "a b", TTL: time.Hour}, "org"},
	}
	for _, c := range mintCases {
		_, err := kr.Mint(ctx, c.req)
		var fe *joinkeys.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Mint(%+v) = %v, want a FieldError for %s", c.req, err, c.field)
		}
	}
	if _, err := kr.SetNodePodCIDR(ctx, "ok", netip.MustParsePrefix("10.1.2.3/24")); !isField(err, "pod_cidr") {
		t.Errorf("SetNodePodCIDR with host bits: %v", err)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{Hostname: "ok", GPUs: []joinkeys.GPU{{Index: 0}, {Index: 0}}}); !isField(err, "gpus[1].index") {
		t.Errorf("Register with duplicate GPU index: %v", err)
	}
	nodes, _ := store.Nodes(ctx)
	keys, _ := store.Keys(ctx)
	if len(nodes) != 0 || len(keys) != 1 {
		t.Errorf("bad input wrote something: %d nodes, %d keys", len(nodes), len(keys))
	}
	if k, _ := kr.Key(ctx, m.ID); k.Uses != 0 {
		t.Errorf("bad input spent %d uses", k.Uses)
	}
}

func isField(err error, field string) bool {
	var fe *joinkeys.FieldError
	return errors.As(err, &fe) && fe.Field == field
}

func testRegister(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, clock := env(t)
	m := mint(t, kr, joinkeys.MintRequest{})
	pub := PublicKey(t)
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-1", PublicKey: pub, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Node.Status != joinkeys.StatusValidated {
		t.Errorf("status after validate %q", j.Node.Status)
	}
	gpus := []joinkeys.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-1"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-2"}}
	// Without a token, the key must come with the reserved public key.
	if _, err := kr.Register(ctx, joinkeys.Registration{Key: m.Secret, Hostname: "gpu-1", PublicKey: PublicKey(t)}); err == nil {
		t.Error("register with the key and a foreign public key was accepted")
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: "gwn_" + strings.Repeat("1", 64), Hostname: "gpu-1"}); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("register with a wrong token: %v", err)
	}
	clock.Advance(time.Minute)
	n, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: gpus, Version: "1.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != joinkeys.StatusRegistered || len(n.GPUs) != 2 || n.GPUs[1].UUID != "GPU-2" || n.PodCIDR.IsValid() || n.Version != "1.0.1" || !n.RegisteredAt.Equal(clock.Now()) {
		t.Errorf("registered node %+v", n)
	}
	// A registration reports the whole inventory again; the same report
	// twice keeps the node as it was.
	again, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: gpus, Version: "1.0.1"})
	if err != nil || again.Status != n.Status || len(again.GPUs) != 2 || !again.RegisteredAt.Equal(n.RegisteredAt) || again.VPNIP != n.VPNIP {
		t.Errorf("the same registration again = %+v, %v", again, err)
	}
	if n, err = kr.ReportVersion(ctx, "gpu-1", j.NodeToken, "1.1.0"); err != nil || n.Version != "1.1.0" {
		t.Errorf("ReportVersion = %+v, %v", n, err)
	}
	if _, err = kr.ReportVersion(ctx, "gpu-1", "nope", "1.1.0"); !errors.Is(err, joinkeys.ErrNodeTokenInvalid) {
		t.Errorf("ReportVersion with bad token: %v", err)
	}
	if n, err = kr.SetNodePodCIDR(ctx, "gpu-1", netip.MustParsePrefix("10.42.65.0/24")); err != nil || n.PodCIDR.String() != "10.42.65.0/24" {
		t.Errorf("SetNodePodCIDR = %+v, %v", n, err)
	}
	if n, err = kr.MarkDisconnected(ctx, "gpu-1", "admin"); err != nil || n.Status != joinkeys.StatusDisconnected {
		t.Errorf("MarkDisconnected = %+v, %v", n, err)
	}
	got, err := kr.Node(ctx, "gpu-1")
	if err != nil || got.Status != joinkeys.StatusDisconnected || len(got.GPUs) != 2 || got.Version != "1.1.0" || got.PodCIDR.String() != "10.42.65.0/24" || got.VPNIP != j.Node.VPNIP {
		t.Errorf("stored node %+v, %v", got, err)
	}
}

func testAudit(t *testing.T, env envFunc) {
	ctx := context.Background()
	kr, _, _ := env(t)
	m := mint(t, kr, joinkeys.MintRequest{CreatedBy: "alice"})
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "h1", PublicKey: PublicKey(t), Source: "198.18.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret + "x", Hostname: "h2", PublicKey: PublicKey(t)})
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "h1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.MarkDisconnected(ctx, "h1", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "h1", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Revoke(ctx, m.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	events, err := kr.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, e := range events {
		types = append(types, string(e.Type))
		if i > 0 && e.ID <= events[i-1].ID {
			t.Errorf("audit ids not increasing: %d after %d", e.ID, events[i-1].ID)
		}
		if strings.Contains(e.Reason, m.Secret[len(m.Secret)-20:]) {
			t.Errorf("audit event %+v contains the secret", e)
		}
	}
	want := "key_minted validation_accepted validation_rejected node_registered node_disconnected node_released key_revoked"
	if strings.Join(types, " ") != want {
		t.Fatalf("audit trail\n got %s\nwant %s", strings.Join(types, " "), want)
	}
	if events[0].Actor != "alice" || events[1].Actor != "198.18.9.9" || events[2].Reason == "" {
		t.Errorf("audit details: %+v", events[:3])
	}
	rejected, _ := kr.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventValidationRejected})
	if len(rejected) != 1 || rejected[0].Hostname != "h2" {
		t.Errorf("filtered audit %+v", rejected)
	}
	last, _ := kr.Audit(ctx, joinkeys.AuditQuery{Limit: 2})
	if len(last) != 2 || last[1].Type != joinkeys.EventKeyRevoked {
		t.Errorf("limited audit %+v", last)
	}
}

// testPruneAudit: PruneAudit keeps the newest events of each hostname up
// to MaxPerHostname, of all up to MaxEvents, and none older than MaxAge;
// Audit reads what is left, its newest first by Limit.
func testPruneAudit(t *testing.T, env envFunc) {
	ctx := context.Background()
	_, store, clock := env(t)
	start := clock.Now().UTC()
	var appended []joinkeys.AuditEvent
	hosts := []string{"h1", "h1", "h2", "h1", "", "h2", "h3"}
	types := []joinkeys.EventType{joinkeys.EventValidationRejected, joinkeys.EventValidationRejected, joinkeys.EventNodeRegistered}
	for i := range 42 {
		e := joinkeys.AuditEvent{At: start.Add(time.Duration(i) * time.Hour), Type: types[i%len(types)], Hostname: hosts[i%len(hosts)], Reason: fmt.Sprintf("event %d", i)}
		if err := store.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		appended = append(appended, e)
	}
	now := start.Add(42 * time.Hour)
	r := joinkeys.AuditRetention{MaxEvents: 4, MaxRejected: 8, MaxPerHostname: 3, MaxAge: 30 * time.Hour}
	removed, err := store.PruneAudit(ctx, r, now)
	if err != nil {
		t.Fatal(err)
	}
	left, err := store.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if removed != len(appended)-len(left) {
		t.Errorf("PruneAudit says %d went; %d of %d are left", removed, len(left), len(appended))
	}
	type class struct {
		host     string
		rejected bool
	}
	perHost := map[class]int{}
	totals := map[bool]int{}
	for _, e := range left {
		rejected := e.Type == joinkeys.EventValidationRejected
		perHost[class{e.Hostname, rejected}]++
		totals[rejected]++
		if e.At.Before(now.Add(-r.MaxAge)) {
			t.Errorf("kept %q, older than %s", e.Reason, r.MaxAge)
		}
	}
	for c, n := range perHost {
		if c.host != "" && n > r.MaxPerHostname {
			t.Errorf("kept %d events of %+v, bound %d", n, c, r.MaxPerHostname)
		}
	}
	if totals[true] > r.MaxRejected || totals[false] > r.MaxEvents || totals[false] == 0 || left[len(left)-1].Reason != "event 41" {
		t.Fatalf("left %d rejected (bound %d) and %d other events (bound %d), newest %+v", totals[true], r.MaxRejected, totals[false], r.MaxEvents, left)
	}
	// What is kept is what the bounds keep, reckoned newest first.
	var want []string
	for _, e := range joinkeys.Retained(appended, r, now) {
		want = append(want, e.Reason)
	}
	var got []string
	for _, e := range left {
		got = append(got, e.Reason)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("kept %v\nwant %v", got, want)
	}
	newest, err := store.Audit(ctx, joinkeys.AuditQuery{Hostname: "h1", Limit: 2})
	if err != nil || len(newest) != 2 || newest[1].Reason != want[lastOf(left, "h1")] {
		t.Errorf("the newest two of h1: %+v, %v", newest, err)
	}
	// A flood of rejected attempts evicts none of the other events.
	for i := range 30 {
		if err := store.AppendAudit(ctx, joinkeys.AuditEvent{At: now, Type: joinkeys.EventValidationRejected, Hostname: fmt.Sprintf("probe-%d", i), Reason: "flood"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.PruneAudit(ctx, r, now); err != nil {
		t.Fatal(err)
	}
	others, err := store.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventNodeRegistered})
	if err != nil || len(others) != totals[false] {
		t.Errorf("after a flood of rejections, %d other events, want %d (%v)", len(others), totals[false], err)
	}
	if again, err := store.PruneAudit(ctx, r, now); err != nil || again != 0 {
		t.Errorf("a second PruneAudit removed %d, %v", again, err)
	}
}

// lastOf is the index in events of the newest event of hostname.
func lastOf(events []joinkeys.AuditEvent, hostname string) int {
	last := -1
	for i, e := range events {
		if e.Hostname == hostname {
			last = i
		}
	}
	return last
}
