package kubestore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh/wgkey"
)

func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }

var (
	installOnce sync.Once
	installErr  error
	namespaces  atomic.Int64
)

// ledger returns the shared control plane with the ledger's CRDs
// installed, and a new namespace on it.
func ledger(t testing.TB) (*testcluster.Cluster, string) {
	t.Helper()
	c := testcluster.Shared(t)
	installOnce.Do(func() { installErr = kubestore.InstallCRDs(context.Background(), c.Config) })
	if installErr != nil {
		t.Fatal(installErr)
	}
	name := fmt.Sprintf("ledger-%d", namespaces.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, name
}

func newStore(t testing.TB) *kubestore.Store {
	t.Helper()
	c, ns := ledger(t)
	s, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store { return newStore(t) })
}

// TestTwoStoresShareOneLedger: two Stores on one namespace (two servers)
// reserve at once; every address, hostname and public key is held once,
// and each claim belongs to a node.
func TestTwoStoresShareOneLedger(t *testing.T) {
	ctx := context.Background()
	c, ns := ledger(t)
	var keyrings []*joinkeys.Keyring
	var stores []*kubestore.Store
	for range 2 {
		s, err := kubestore.New(c.Config, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
		kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		keyrings = append(keyrings, kr)
	}
	m, err := keyrings[0].Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour, MaxUses: 50})
	if err != nil {
		t.Fatal(err)
	}
	const joins = 60 // more than the key allows
	var wg sync.WaitGroup
	errs := make([]error, joins)
	for i := range joins {
		wg.Go(func() {
			_, errs[i] = keyrings[i%2].Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("n-%d", i%55), PublicKey: storetest.PublicKey(t)})
		})
	}
	wg.Wait()
	accepted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, joinkeys.ErrKeyExhausted), errors.Is(err, joinkeys.ErrHostnameTaken):
		default:
			t.Errorf("join: %v", err)
		}
	}
	nodes, err := stores[1].Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != accepted || accepted > 50 || accepted < 45 {
		t.Fatalf("%d joins accepted, %d nodes in the ledger; want equal, at most the key's 50 uses", accepted, len(nodes))
	}
	if k, _ := keyrings[1].Key(ctx, m.ID); k.Uses != accepted {
		t.Errorf("key uses %d, want %d", k.Uses, accepted)
	}
	seen := map[netip.Addr]string{}
	for _, n := range nodes {
		if other, dup := seen[n.VPNIP]; dup {
			t.Errorf("%s held by %s and %s", n.VPNIP, other, n.Hostname)
		}
		seen[n.VPNIP] = n.Hostname
	}
	claims, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerclaims"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 2*len(nodes) {
		t.Errorf("%d claims for %d nodes; want an address and a public key each", len(claims.Items), len(nodes))
	}
}

// TestStaleClaimsAreTakenBack: a server killed between taking a
// reservation's claims and creating its node leaves claims without a
// node; once they are older than StaleClaimAge they no longer block the
// public key or the address.
func TestStaleClaimsAreTakenBack(t *testing.T) {
	ctx := context.Background()
	c, ns := ledger(t)
	clock := storetest.NewClock()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	s, err := kubestore.New(c.Config, ns, &kubestore.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.7.0/29", "198.18.7.1"), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	pub := storetest.PublicKey(t)
	key, _ := wgkey.Parse(pub)
	claims := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerclaims"}).Namespace(ns)
	leftover := func(name string) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": "LedgerClaim",
			"metadata": map[string]any{"name": name, "labels": map[string]any{kubestore.Group + "/claim": map[bool]string{true: "address", false: "public-key"}[name[:3] == "ip."]}},
			"spec":     map[string]any{"hostname": "died", "reservation": "dead-reservation"},
		}}
		if _, err := claims.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leftover("key." + hex.EncodeToString(key[:]))
	for i := 2; i <= 6; i++ { // the whole range
		leftover(fmt.Sprintf("ip.198.18.7.%d", i))
	}
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "alive", PublicKey: pub})
	if err != nil {
		t.Fatalf("join over a dead server's claims: %v", err)
	}
	if r.Node.VPNIP.String() != "198.18.7.2" {
		t.Errorf("got %s, want the lowest address back, 198.18.7.2", r.Node.VPNIP)
	}
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		var names []string
		for _, o := range list.Items {
			names = append(names, o.GetName())
		}
		t.Errorf("claims left: %v; want only the new node's two", names)
	}

	// Young claims of a reservation in flight are respected.
	fresh, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	kr2, _ := joinkeys.New(fresh, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.7.0/29", "198.18.7.1"), Now: clock.Now})
	pub2 := storetest.PublicKey(t)
	key2, _ := wgkey.Parse(pub2)
	leftover("key." + hex.EncodeToString(key2[:]))
	if _, err := kr2.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "other", PublicKey: pub2}); !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
		t.Errorf("join with a public key a reservation in flight holds: %v, want ErrPublicKeyTaken", err)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) joinkeys.Store { return newStore(b) })
}

// TestACommittedReservationKeepsItsClaims: once the node exists, a failure
// after it (here its audit event: the caller may not write the audit
// trail) gives none of its claims back, so no other node can take its
// address or public key.
func TestACommittedReservationKeepsItsClaims(t *testing.T) {
	ctx := context.Background()
	c, ns := ledger(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "no-audit", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{kubestore.Group}, Resources: []string{"joinkeys", "ledgernodes", "ledgerclaims", "podcidrtables"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{kubestore.Group}, Resources: []string{"ledgerevents"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-audit", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "no-audit"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "ledger-without-audit"}}}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "ledger-without-audit"}
	s, err := kubestore.New(cfg, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := wgkey.Parse(storetest.PublicKey(t))
	r := joinkeys.Reservation{
		Node:      joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "kept", PublicKey: pub, Status: joinkeys.StatusValidated}},
		Addresses: joinkeys.MustPool("198.18.9.0/29", "198.18.9.1").Addresses(),
		Event:     joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventValidationAccepted, Hostname: "kept"},
	}
	var forbidden error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, forbidden = s.ReserveNode(ctx, r)
		if forbidden != nil && strings.Contains(forbidden.Error(), "audit event was not written") || time.Now().After(deadline) {
			break // RBAC takes a moment to apply
		}
		_, _ = s.DeleteNode(ctx, "kept", 0, time.Now())
	}
	if forbidden == nil || !strings.Contains(forbidden.Error(), "audit event was not written") {
		t.Fatalf("a reservation whose audit event is refused: %v", forbidden)
	}
	n, err := s.Node(ctx, "kept")
	if err != nil {
		t.Fatalf("the node: %v", err)
	}
	claims, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerclaims"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 2 {
		t.Errorf("%d claims after the audit failed, want the node's address and public key", len(claims.Items))
	}
	other, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.Node.Hostname, r2.Event = "next", joinkeys.AuditEvent{}
	if got, err := other.ReserveNode(ctx, r2); !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
		t.Errorf("another node with the kept node's public key: %+v, %v", got.Node, err)
	}
	r2.Node.PublicKey, _ = wgkey.Parse(storetest.PublicKey(t))
	if got, err := other.ReserveNode(ctx, r2); err != nil || got.VPNIP == n.VPNIP {
		t.Errorf("another node got %s (%v); the kept node holds %s", got.VPNIP, err, n.VPNIP)
	}
}

// TestAFailedWriteGivesItsPodCIDRBack: a write clearing a node's pod CIDR
// that loses its compare-and-swap (another server wrote the node) puts
// the table entry back, so the CIDR stays the node's.
func TestAFailedWriteGivesItsPodCIDRBack(t *testing.T) {
	ctx := context.Background()
	c, ns := ledger(t)
	var krs []*joinkeys.Keyring
	for range 2 {
		s, err := kubestore.New(c.Config, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		krs = append(krs, kr)
	}
	m, err := krs[0].Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j, err := krs[0].Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "a", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := krs[0].Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "b", PublicKey: storetest.PublicKey(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := krs[0].SetNodePodCIDR(ctx, "a", netip.MustParsePrefix("10.42.0.0/24")); err != nil {
		t.Fatal(err)
	}
	// One server read a; another writes it; the first one's write based
	// on its read (clearing the pod CIDR) loses the compare-and-swap
	// after it took the table entry away.
	s0, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := s0.Node(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := krs[1].ReportVersion(ctx, "a", j.NodeToken, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	stale.PodCIDR = netip.Prefix{}
	if _, err := s0.UpdateNode(ctx, stale, joinkeys.AuditEvent{}); !errors.Is(err, joinkeys.ErrNodeChanged) {
		t.Fatalf("a write based on a stale read: %v, want ErrNodeChanged", err)
	}
	if _, err := krs[1].SetNodePodCIDR(ctx, "b", netip.MustParsePrefix("10.42.0.0/16")); !errors.Is(err, joinkeys.ErrPodCIDRConflict) {
		t.Errorf("b taking a CIDR around a's after a's failed clear: %v, want a conflict", err)
	}
}

// TestALeftoverPodCIDREntryGivesWay: the table entry of a node a dead
// server released but did not take out of the table blocks an
// overlapping pod CIDR only until it is older than StaleClaimAge.
func TestALeftoverPodCIDREntryGivesWay(t *testing.T) {
	ctx := context.Background()
	c, ns := ledger(t)
	tables := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "podcidrtables"}).Namespace(ns)
	leftover := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": "PodCIDRTable",
		"metadata": map[string]any{"name": "pod-cidrs"},
		"spec": map[string]any{"entries": map[string]any{
			"gone": map[string]any{"cidr": "10.42.0.0/24", "reservation": "dead", "since": time.Now().UTC().Format(time.RFC3339)},
		}},
	}}
	if _, err := tables.Create(ctx, leftover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setCIDR := func(now func() time.Time) error {
		s, err := kubestore.New(c.Config, ns, &kubestore.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kr.Node(ctx, "alive"); errors.Is(err, joinkeys.ErrNodeNotFound) {
			m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "alive", PublicKey: storetest.PublicKey(t)}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = kr.SetNodePodCIDR(ctx, "alive", netip.MustParsePrefix("10.42.0.0/23"))
		return err
	}
	if err := setCIDR(time.Now); !errors.Is(err, joinkeys.ErrPodCIDRConflict) {
		t.Errorf("over a young entry: %v, want a conflict", err)
	}
	if err := setCIDR(func() time.Time { return time.Now().Add(time.Hour) }); err != nil {
		t.Errorf("over an entry no node holds, an hour old: %v", err)
	}
}

// TestRejectedAttemptsLeaveABoundedTrail: 10,000 validates with made-up
// keys and hostnames (what a joined machine could post) leave at most the
// retention's bound of LedgerEvent objects in the namespace, however the
// minutes fall: the rejected attempts are aggregated as they come, and a
// compaction prunes to the bound.
func TestRejectedAttemptsLeaveABoundedTrail(t *testing.T) {
	c, ns := ledger(t)
	s, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := storetest.NewClock()
	bound := joinkeys.AuditRetention{MaxEvents: 100, MaxRejected: 150, MaxPerHostname: 20, MaxAge: 24 * time.Hour}
	kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/16", "198.18.0.1"),
		Now: clock.Now, AuditRetention: bound})
	if err != nil {
		t.Fatal(err)
	}
	pub := storetest.PublicKey(t)
	const attempts = 10_000
	for i := range attempts {
		key := fmt.Sprintf("gwk_%012x.%064x", i, i)
		if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: key, Hostname: fmt.Sprintf("probe-%d", i), PublicKey: pub, Version: "1.0.0"}); err == nil {
			t.Fatal("a made-up key was accepted")
		}
		if i%500 == 499 {
			clock.Advance(20 * time.Second) // the attempts span about seven minutes
		}
		if i%3000 == 2999 {
			if _, err := kr.CompactAudit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(time.Minute)
	if _, err := kr.CompactAudit(ctx); err != nil {
		t.Fatal(err)
	}
	objects := 0
	list, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerevents"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objects = len(list.Items)
	t.Logf("%d rejected validates left %d LedgerEvent objects (bound %d)", attempts, objects, bound.MaxRejected)
	if objects == 0 || objects > bound.MaxRejected {
		t.Errorf("%d LedgerEvent objects after %d rejected validates, bound %d", objects, attempts, bound.MaxRejected)
	}
	// The summaries say how many were not recorded one by one.
	events, err := kr.Audit(ctx, joinkeys.AuditQuery{Type: joinkeys.EventValidationRejected, Limit: 5})
	if err != nil || len(events) != 5 {
		t.Fatalf("the newest five: %+v, %v", events, err)
	}
	if !strings.Contains(events[len(events)-1].Reason, "more rejected attempts from") {
		t.Errorf("the newest rejection event is not a summary: %+v", events[len(events)-1])
	}
}

// A released node's address rests on the ledger, not in one Store's
// memory: another Store (another server replica), reading the claims
// afresh, neither hands it out before its rest is over nor takes it for a
// leftover, and hands it out after.
func TestARestingAddressIsSeenByEveryStore(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	keyring := func() *joinkeys.Keyring {
		s, err := kubestore.New(c.Config, ns, &kubestore.Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.5.0/29", "198.18.5.1"), Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return kr
	}
	a := keyring()
	m, err := a.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	join := func(kr *joinkeys.Keyring, host string) (joinkeys.JoinResult, error) {
		return kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: host, PublicKey: storetest.PublicKey(t), Version: "1.0.0"})
	}
	var held []netip.Addr
	for i := range 5 { // the whole range
		j, err := join(a, fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, j.Node.VPNIP)
	}
	if _, err := a.Release(ctx, "n2", "admin"); err != nil {
		t.Fatal(err)
	}
	// Past the leftover age, so a reload would take a claim no node holds.
	clock.Advance(10 * time.Minute)
	b := keyring()
	if _, err := join(b, "too-soon"); !errors.Is(err, joinkeys.ErrPoolExhausted) {
		t.Fatalf("a join on another Store while the freed address rests: %v, want ErrPoolExhausted", err)
	}
	clock.Advance(joinkeys.DefaultAddressQuarantine)
	j, err := join(b, "after-rest")
	if err != nil || j.Node.VPNIP != held[2] {
		t.Fatalf("after the rest: %+v, %v; want %s", j.Node, err, held[2])
	}
	// And the first Store, whose book still says it rests, learns it is
	// taken: the range is full.
	if _, err := join(a, "one-more"); !errors.Is(err, joinkeys.ErrPoolExhausted) {
		t.Errorf("a join on the first Store with every address held: %v", err)
	}
}
