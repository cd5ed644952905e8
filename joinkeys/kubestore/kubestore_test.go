package kubestore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/wgkey"
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
