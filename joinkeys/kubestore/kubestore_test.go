package kubestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"slices"
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

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) joinkeys.Store { return newStore(b) })
}

// orgKey is an org key of id, valid for the hour to come, with maxUses
// (0: any number).
func orgKey(id string, maxUses int) joinkeys.KeyRecord {
	now := time.Now().UTC()
	return joinkeys.KeyRecord{Key: joinkeys.Key{ID: id, Kind: joinkeys.KindOrg, Org: "acme", CreatedAt: now, ExpiresAt: now.Add(time.Hour), MaxUses: maxUses}, SecretHash: []byte("hash")}
}

// insertOrgKey inserts orgKey(id, maxUses) through s.
func insertOrgKey(t *testing.T, s *kubestore.Store, id string, maxUses int) {
	t.Helper()
	if err := s.InsertKey(context.Background(), orgKey(id, maxUses)); err != nil {
		t.Fatal(err)
	}
}

// storeThrough is a Store on a new ledger whose requests to the API
// server go through the transport wrap returns (given the one they would
// have taken).
func storeThrough(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (*testcluster.Cluster, string, *kubestore.Store) {
	t.Helper()
	c, ns := ledger(t)
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = wrap
	s, err := kubestore.New(cfg, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns, s
}

// oldNodeSchema plays a LedgerNode CRD of an earlier version, whose
// schema has no spec.events: the API server never sees the events a
// Store writes in its nodes.
type oldNodeSchema struct{ next http.RoundTripper }

func (o oldNodeSchema) RoundTrip(r *http.Request) (*http.Response, error) {
	if (r.Method != http.MethodPost && r.Method != http.MethodPut) || !strings.Contains(r.URL.Path, "/ledgernodes") || r.Body == nil {
		return o.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		delete(spec, "events")
	}
	if body, err = json.Marshal(obj); err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength, r.GetBody = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
	return o.next.RoundTrip(r)
}

// ledgerWithoutAudit is a Store on a new ledger whose LedgerNode CRD
// predates node events (oldNodeSchema), so that a node's events go to
// the trail as they did then, and whose credentials may
// not write audit events, nor delete nodes unless nodeDeletes.
func ledgerWithoutAudit(t *testing.T, nodeDeletes bool) (*testcluster.Cluster, string, *kubestore.Store) {
	t.Helper()
	c, ns := ledger(t)
	nodeVerbs := []string{"get", "list", "create", "update"}
	if nodeDeletes {
		nodeVerbs = append(nodeVerbs, "delete")
	}
	cfg := bindUser(t, c, ns, "ledger-without-audit", []rbacv1.PolicyRule{
		{APIGroups: []string{kubestore.Group}, Resources: []string{"joinkeys", "ledgerclaims", "podcidrtables"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{kubestore.Group}, Resources: []string{"ledgernodes"}, Verbs: nodeVerbs},
		{APIGroups: []string{kubestore.Group}, Resources: []string{"ledgerevents"}, Verbs: []string{"get", "list"}},
	})
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return oldNodeSchema{rt} }
	s, err := kubestore.New(cfg, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, ns, s
}

// bindUser binds user to a Role of rules in namespace ns and returns the
// control plane's configuration impersonating user.
func bindUser(t *testing.T, c *testcluster.Cluster, ns, user string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Rules: rules}
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// reserveUntilAudited reserves r until the audit's refusal answers (RBAC
// takes a moment to apply) and returns that answer.
func reserveUntilAudited(t *testing.T, s *kubestore.Store, r joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := s.ReserveNode(context.Background(), r)
		if err != nil && strings.Contains(err.Error(), "audit event was not written") || time.Now().After(deadline) {
			return n, err
		}
		if err == nil {
			t.Fatalf("a reservation whose audit event is refused: %+v", n.Node)
		}
	}
}

// TestAReservationWithoutItsEventIsUndone: with a LedgerNode CRD of an
// earlier version, a reservation whose audit event cannot be written to
// the trail removes its node again and gives its key's
// use back: its error means nothing was written, and the same hostname,
// key and address are free for the next.
func TestAReservationWithoutItsEventIsUndone(t *testing.T) {
	ctx := context.Background()
	c, ns, s := ledgerWithoutAudit(t, true)
	now := time.Now().UTC()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := s.InsertKey(ctx, orgKey("k1", 1))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err) // RBAC takes a moment to apply
		}
	}
	pub, _ := wgkey.Parse(storetest.PublicKey(t))
	r := joinkeys.Reservation{
		Node:       joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "undone", PublicKey: pub, Status: joinkeys.StatusValidated}},
		Addresses:  joinkeys.MustPool("198.18.9.0/29", "198.18.9.1").Addresses(),
		SpendKeyID: "k1", Now: now,
		Event: joinkeys.AuditEvent{At: now, Type: joinkeys.EventValidationAccepted, Hostname: "undone"},
	}
	n, err := reserveUntilAudited(t, s, r)
	if err == nil || !strings.Contains(err.Error(), "not reserved") || n.Hostname != "" {
		t.Fatalf("a reservation whose audit event is refused: %+v, %v; want an error and no node", n.Node, err)
	}
	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Node(ctx, "undone"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("the undone node in the ledger: %v", err)
	}
	if k, err := reader.Key(ctx, "k1"); err != nil || k.Uses != 0 {
		t.Errorf("the key after the undone reservation: %d uses, %v; want its use back", k.Uses, err)
	}
	r.Event = joinkeys.AuditEvent{}
	if again, err := s.ReserveNode(ctx, r); err != nil || again.VPNIP.String() != "198.18.9.2" {
		t.Errorf("the same reservation without an event: %+v, %v; want it at the first address, 198.18.9.2", again.Node, err)
	}
}

// TestACommittedReservationKeepsWhatItHolds: with a LedgerNode CRD of an
// earlier version, a reservation whose audit event cannot be written to
// the trail, and whose node cannot be removed again
// either, stays, as its error says: its hostname, key and address stay
// held by this writer and by the next.
func TestACommittedReservationKeepsWhatItHolds(t *testing.T) {
	ctx := context.Background()
	c, ns, s := ledgerWithoutAudit(t, false)
	pub, _ := wgkey.Parse(storetest.PublicKey(t))
	r := joinkeys.Reservation{
		Node:      joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "kept", PublicKey: pub, Status: joinkeys.StatusValidated}},
		Addresses: joinkeys.MustPool("198.18.9.0/29", "198.18.9.1").Addresses(),
		Event:     joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventValidationAccepted, Hostname: "kept"},
	}
	if _, err := reserveUntilAudited(t, s, r); err == nil || !strings.Contains(err.Error(), "removing it failed") || errors.Is(err, joinkeys.ErrFenced) {
		t.Fatalf("a reservation whose audit event and removal are refused: %v", err)
	}
	n, err := s.Node(ctx, "kept")
	if err != nil {
		t.Fatalf("the node: %v", err)
	}
	next, err := kubestore.New(c.Config, ns, nil) // the writer after a takeover
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"this writer", "the next writer"} {
		writer := map[string]*kubestore.Store{"this writer": s, "the next writer": next}[name]
		r2 := r
		r2.Node.Hostname, r2.Event = "next-"+strings.ReplaceAll(name, " ", "-"), joinkeys.AuditEvent{}
		if got, err := writer.ReserveNode(ctx, r2); !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
			t.Errorf("%s: another node with the kept node's public key: %+v, %v", name, got.Node, err)
		}
		r2.Node.PublicKey, _ = wgkey.Parse(storetest.PublicKey(t))
		if got, err := writer.ReserveNode(ctx, r2); err != nil || got.VPNIP == n.VPNIP {
			t.Errorf("%s: another node got %s (%v); the kept node holds %s", name, got.VPNIP, err, n.VPNIP)
		}
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

// TestARestingAddressOutlivesItsWriter: a released node's address rests
// on the ledger (its LedgerClaim), not in the writer's memory: the next
// writer (after a takeover) neither hands it out before its rest is over
// nor forgets it, and hands it out after.
func TestARestingAddressOutlivesItsWriter(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	keyring := func() *joinkeys.Keyring {
		s, err := kubestore.New(c.Config, ns, nil)
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
	clock.Advance(10 * time.Minute)
	b := keyring()
	if _, err := join(b, "too-soon"); !errors.Is(err, joinkeys.ErrPoolExhausted) {
		t.Fatalf("a join on the next writer while the freed address rests: %v, want ErrPoolExhausted", err)
	}
	clock.Advance(joinkeys.DefaultAddressQuarantine)
	j, err := join(b, "after-rest")
	if err != nil || j.Node.VPNIP != held[2] {
		t.Fatalf("after the rest: %+v, %v; want %s", j.Node, err, held[2])
	}
	claims, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgerclaims"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 0 {
		t.Errorf("%d LedgerClaims once the resting address is held again (%v), want none", len(claims.Items), err)
	}
}

// TestAReaderReadsWhatTheWriterWrote: a Store that never writes (a
// replica that does not lead) answers from the API server what the
// writer wrote, a node found by its public key included.
func TestAReaderReadsWhatTheWriterWrote(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	writer, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := joinkeys.New(writer, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.6.0/24", "198.18.6.1")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pub := storetest.PublicKey(t)
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "gpu-1", PublicKey: pub, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: "gpu-1", GPUs: []joinkeys.GPU{{Name: "H100", MemoryMiB: 81559}}}); err != nil {
		t.Fatal(err)
	}
	key, _ := wgkey.Parse(pub)
	for name, s := range map[string]*kubestore.Store{"writer": writer, "reader": reader} {
		// A reader finds a node by its key in the API server's watch
		// cache: a moment after the write, which it may first show as
		// the reservation before the registration.
		n, err := s.NodeByPublicKey(ctx, key)
		for deadline := time.Now().Add(5 * time.Second); (errors.Is(err, joinkeys.ErrNodeNotFound) || err == nil && n.Status != joinkeys.StatusRegistered) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			n, err = s.NodeByPublicKey(ctx, key)
		}
		if err != nil || n.Hostname != "gpu-1" || n.VPNIP != j.Node.VPNIP || n.Status != joinkeys.StatusRegistered {
			t.Errorf("%s: by public key: %+v, %v", name, n.Node, err)
		}
		if byName, err := s.Node(ctx, "gpu-1"); err != nil || byName.Revision != n.Revision {
			t.Errorf("%s: by hostname: %+v, %v", name, byName.Node, err)
		}
		if _, err := s.NodeByPublicKey(ctx, mustKey(t)); !errors.Is(err, joinkeys.ErrNodeNotFound) {
			t.Errorf("%s: an unknown key: %v", name, err)
		}
		if k, err := s.Key(ctx, m.ID); err != nil || k.Uses != 1 {
			t.Errorf("%s: the key: %+v, %v", name, k, err)
		}
		if kinds, err := s.GPUKinds(ctx); err != nil || len(kinds) != 1 || kinds[0].Nodes != 1 {
			t.Errorf("%s: GPU kinds %+v, %v", name, kinds, err)
		}
	}
	if _, err := kr.Revoke(ctx, m.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if k, err := reader.Key(ctx, m.ID); err != nil || !k.Revoked() {
		t.Errorf("the reader sees the revocation at once: %+v, %v", k, err)
	}
}

func mustKey(t *testing.T) wgkey.Key {
	k, err := wgkey.Parse(storetest.PublicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestALedgerWrittenWithClaimsIsBroughtUpToDate: a ledger as stores wrote
// it before the one writer (a claim per live node's address and public
// key, a PodCIDRTable, nodes without the public-key label) is brought up
// to date when a writer first loads it: the live nodes' claims and the
// table go, a resting address's claim stays and keeps resting, the nodes
// are labelled, and what the old objects guarded is still guarded.
func TestALedgerWrittenWithClaimsIsBroughtUpToDate(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	gvr := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: resource}
	}
	create := func(resource, kind, name string, labels map[string]any, spec map[string]any) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": kind,
			"metadata": map[string]any{"name": name, "labels": labels}, "spec": spec,
		}}
		if _, err := c.Dynamic.Resource(gvr(resource)).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old := mustKey(t)
	now := time.Now().UTC().Format(time.RFC3339)
	create("ledgernodes", "LedgerNode", "old-node", nil, map[string]any{"publicKey": old.String(), "vpnIP": "198.18.8.2", "status": "registered",
		"podCIDR": "10.42.7.0/24", "reservation": "r1", "poolID": "198.18.8.0/29", "createdAt": now})
	create("ledgerclaims", "LedgerClaim", "ip.198.18.8.2", map[string]any{kubestore.Group + "/claim": "address"}, map[string]any{"hostname": "old-node", "reservation": "r1"})
	create("ledgerclaims", "LedgerClaim", fmt.Sprintf("key.%x", old[:]), map[string]any{kubestore.Group + "/claim": "public-key"}, map[string]any{"hostname": "old-node", "reservation": "r1"})
	create("ledgerclaims", "LedgerClaim", "ip.198.18.8.3", map[string]any{kubestore.Group + "/claim": "address"}, map[string]any{"hostname": "left", "reservation": "r2", "releasedAt": now})
	create("podcidrtables", "PodCIDRTable", "pod-cidrs", nil, map[string]any{"entries": map[string]any{"old-node": map[string]any{"cidr": "10.42.7.0/24", "reservation": "r1"}}})

	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	claims, err := c.Dynamic.Resource(gvr("ledgerclaims")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 || claims.Items[0].GetName() != "ip.198.18.8.3" {
		var names []string
		for _, o := range claims.Items {
			names = append(names, o.GetName())
		}
		t.Errorf("claims left: %v; want only the resting address's", names)
	}
	if tables, err := c.Dynamic.Resource(gvr("podcidrtables")).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil || len(tables.Items) != 0 {
		t.Errorf("the pod CIDR table is still there (%v)", err)
	}
	n, err := reader.NodeByPublicKey(ctx, old)
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, joinkeys.ErrNodeNotFound) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		n, err = reader.NodeByPublicKey(ctx, old)
	}
	if err != nil || n.Hostname != "old-node" {
		t.Errorf("a reader finds the old node by its key: %+v, %v", n.Node, err)
	}

	pool := joinkeys.MustPool("198.18.8.0/29", "198.18.8.1")
	kr, err := joinkeys.New(writer, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "new-node", PublicKey: storetest.PublicKey(t), Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if ip := j.Node.VPNIP.String(); ip == "198.18.8.2" || ip == "198.18.8.3" {
		t.Errorf("the new node got %s: the old node's address, or one at rest", ip)
	}
	if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "thief", PublicKey: old.String(), Version: "1.0.0"}); !errors.Is(err, joinkeys.ErrPublicKeyTaken) {
		t.Errorf("another hostname with the old node's key: %v, want ErrPublicKeyTaken", err)
	}
	if _, err := kr.SetNodePodCIDR(ctx, "new-node", netip.MustParsePrefix("10.42.0.0/16")); !errors.Is(err, joinkeys.ErrPodCIDRConflict) {
		t.Errorf("a pod CIDR around the old node's: %v, want a conflict", err)
	}
}

// TestCallsPerJoin counts the API server requests of one machine's join
// (validate, then register) on the writer: its reads are answered from
// its index and its two audit events are written in its node, so a join
// alone costs the key's use, the node's creation and its update; joins of
// 16 machines at once share their key's uses (a JoinKey update each
// batch), at most three a join too (the bound is four).
func TestCallsPerJoin(t *testing.T) {
	c, ns := ledger(t)
	ctx := context.Background()
	counter := &testcluster.RequestCounter{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = counter.Wrap
	s, err := kubestore.New(cfg, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := joinkeys.New(s, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: joinkeys.MustPool("198.18.0.0/16", "198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	join := func(host string) error {
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: host, PublicKey: storetest.PublicKey(t), Version: "1.0.0"})
		if err != nil {
			return err
		}
		_, err = kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: host})
		return err
	}
	// The first use of the key reads it: from then on its last write is
	// the base of the next.
	if err := join("first"); err != nil {
		t.Fatal(err)
	}
	const joins, clients = 20, 16
	for _, existing := range []int{0, 200} {
		for i := range existing {
			if err := join(fmt.Sprintf("pre-%d-%d", existing, i)); err != nil {
				t.Fatal(err)
			}
		}
		before := counter.Count()
		for i := range joins {
			if err := join(fmt.Sprintf("gpu-%d-%d", existing, i)); err != nil {
				t.Fatal(err)
			}
		}
		perJoin := float64(counter.Count()-before) / joins
		t.Logf("%d nodes in the ledger: %.1f API requests per join, one at a time", existing, perJoin)
		if perJoin > 3 {
			t.Errorf("%.1f API requests per join with %d nodes in the ledger; want at most 3 (the key's use, the node's creation and update)", perJoin, existing)
		}

		before = counter.Count()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for c := range clients {
			wg.Go(func() {
				for i := range joins {
					if err := join(fmt.Sprintf("many-%d-%d-%d", existing, c, i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		perJoin = float64(counter.Count()-before) / (joins * clients)
		t.Logf("%d nodes in the ledger: %.2f API requests per join, %d at once", existing, perJoin, clients)
		if perJoin > 3 {
			t.Errorf("%.2f API requests per join with %d nodes in the ledger, %d at once; want at most 3", perJoin, existing, clients)
		}
	}
	// Every join's two events are in the trail, once each.
	events, err := kr.Audit(ctx, joinkeys.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events {
		if strings.HasPrefix(e.Hostname, "many-") {
			seen[string(e.Type)+" "+e.Hostname]++
		}
	}
	if want := 2 * 2 * joins * clients; len(seen) != want {
		t.Errorf("the trail holds %d distinct events of the concurrent joins, want %d", len(seen), want)
	}
	for what, n := range seen {
		if n != 1 {
			t.Errorf("%s: %d times in the trail", what, n)
		}
	}
}

// holdingTransport holds every node creation until released.
type holdingTransport struct {
	next    http.RoundTripper
	held    chan struct{} // a creation is being held
	release chan struct{}
}

func (h *holdingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgernodes") {
		h.held <- struct{}{}
		<-h.release
	}
	return h.next.RoundTrip(r)
}

// TestStopWritingWaitsForTheWritesUnderWay: a leader that hands over
// stops writing and waits for the writes under way, so that none lands
// after the next writer read the ledger; a new write is refused
// (ErrFenced) until Reload.
func TestStopWritingWaitsForTheWritesUnderWay(t *testing.T) {
	ctx := context.Background()
	holding := &holdingTransport{held: make(chan struct{}, 1), release: make(chan struct{})}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { holding.next = rt; return holding })
	r := joinkeys.Reservation{
		Node:      joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "under-way", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}},
		Addresses: joinkeys.MustPool("198.18.4.0/29", "198.18.4.1").Addresses(),
	}
	reserved := make(chan error, 1)
	go func() { _, err := s.ReserveNode(ctx, r); reserved <- err }()
	<-holding.held // the node's creation is under way
	stopped := make(chan error, 1)
	go func() { stopped <- s.StopWriting(ctx) }()
	// New writes are refused at once, while the one under way goes on.
	for {
		err := s.AppendAudit(ctx, joinkeys.AuditEvent{At: time.Now(), Type: joinkeys.EventKeyMinted})
		if errors.Is(err, joinkeys.ErrFenced) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // StopWriting has not begun yet
	}
	time.Sleep(50 * time.Millisecond) // time enough to return, were it not waiting
	select {
	case err := <-stopped:
		t.Fatalf("StopWriting returned (%v) with a write under way", err)
	default:
	}
	close(holding.release)
	if err := <-reserved; err != nil {
		t.Fatalf("the write under way: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	r.Node.Hostname, r.Node.PublicKey = "after-reload", mustKey(t)
	holding.held = make(chan struct{}, 1)
	if n, err := s.ReserveNode(ctx, r); err != nil || n.VPNIP.String() == "198.18.4.2" {
		t.Errorf("after Reload: %+v, %v; want a write, at another address than the node written under way", n.Node, err)
	}
}

// TestAUseIsGivenBackAfterStopWriting: a reservation under way as its
// Store stops writing, whose node's creation then fails (the hostname
// was taken meanwhile), gives its key's use back: the writes that end a
// write under way are not refused.
func TestAUseIsGivenBackAfterStopWriting(t *testing.T) {
	ctx := context.Background()
	holding := &holdingTransport{held: make(chan struct{}, 1), release: make(chan struct{})}
	c, ns, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { holding.next = rt; return holding })
	insertOrgKey(t, s, "k1", 0)
	r := joinkeys.Reservation{
		Node:       joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "contested", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}},
		Addresses:  joinkeys.MustPool("198.18.5.0/29", "198.18.5.1").Addresses(),
		SpendKeyID: "k1",
		Now:        time.Now().UTC(),
	}
	reserved := make(chan error, 1)
	go func() { _, err := s.ReserveNode(ctx, r); reserved <- err }()
	<-holding.held // the use is spent; the node's creation is under way
	stopped := make(chan error, 1)
	go func() { stopped <- s.StopWriting(ctx) }()
	// Another writer takes the hostname meanwhile.
	other, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.Node.PublicKey, r2.SpendKeyID = mustKey(t), ""
	if _, err := other.ReserveNode(ctx, r2); err != nil {
		t.Fatal(err)
	}
	close(holding.release)
	var taken *joinkeys.HostnameTakenError
	if err := <-reserved; !errors.As(err, &taken) {
		t.Fatalf("the reservation under way: %v, want the hostname taken", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := reader.Key(ctx, "k1"); err != nil || k.Uses != 0 {
		t.Errorf("the key after the failed reservation: %d uses, %v; want its use given back", k.Uses, err)
	}
}

// unsureTransport answers node creations with an error whose outcome is
// unknown (no answer of the API server): the first lost ones after
// sending them (the node is stored), the rest without; the first
// readBacks reads of a node after fail the same way.
type unsureTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	// lost creations still to come, the first sent of them sent
	lost, sent, readBacks int
	// lostDeletes: node deletions sent, then answered with an error
	lostDeletes int
	// lostUpdates: updates of nodes and keys sent, then answered with an
	// error; keyReadBacks reads of a key after the first of them fail
	lostUpdates, keyReadBacks int
	keyReadsFail              bool
	// lostCreate hears of each creation lost
	lostCreate chan struct{}
}

var errUnreachable = errors.New("injected: the API server did not answer")

func (u *unsureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgernodes") && u.lost > 0:
		u.lost--
		if u.lostCreate != nil {
			defer func() { u.lostCreate <- struct{}{} }()
		}
		if u.sent > 0 {
			u.sent--
			return u.sendAndLose(r)
		}
		return nil, errUnreachable
	case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/ledgernodes/") && u.lostDeletes > 0:
		u.lostDeletes--
		return u.sendAndLose(r)
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/ledgernodes/") && u.readBacks > 0:
		u.readBacks--
		return nil, errUnreachable
	case r.Method == http.MethodPut && (strings.Contains(r.URL.Path, "/ledgernodes/") || strings.Contains(r.URL.Path, "/joinkeys/")) && u.lostUpdates > 0:
		u.lostUpdates--
		u.keyReadsFail = u.keyReadBacks > 0
		return u.sendAndLose(r)
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/joinkeys/") && u.keyReadsFail:
		if u.keyReadBacks--; u.keyReadBacks == 0 {
			u.keyReadsFail = false
		}
		return nil, errUnreachable
	}
	return u.next.RoundTrip(r)
}

// sendAndLose sends r and answers with an error instead of its answer.
func (u *unsureTransport) sendAndLose(r *http.Request) (*http.Response, error) {
	resp, err := u.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errUnreachable
}

// TestAnUnknownCreateKeepsWhatItHolds: a node creation whose outcome is
// unknown keeps its hostname, address and key's use held while reads
// find out (other reservations go on, and none is handed its address;
// one of the same hostname waits its turn): a
// node that landed is the reservation's answer, with its audit event; one
// that did not is given back, with its use, once it can no longer land.
func TestAnUnknownCreateKeepsWhatItHolds(t *testing.T) {
	defer kubestore.SetSettleTimes(6*time.Second, 500*time.Millisecond)()
	ctx := context.Background()
	unsure := &unsureTransport{lost: 2, sent: 1, readBacks: 1, lostCreate: make(chan struct{}, 2)}
	c, ns, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { unsure.next = rt; return unsure })
	reader, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	insertOrgKey(t, s, "k1", 0)
	reserve := func(hostname string) (joinkeys.NodeRecord, error) {
		return s.ReserveNode(ctx, joinkeys.Reservation{
			Node:       joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: hostname, PublicKey: mustKey(t), Status: joinkeys.StatusValidated}},
			Addresses:  joinkeys.MustPool("198.18.6.0/29", "198.18.6.1").Addresses(),
			SpendKeyID: "k1", Now: time.Now().UTC(),
			Event: joinkeys.AuditEvent{At: time.Now().UTC(), Type: joinkeys.EventValidationAccepted, KeyID: "k1", Hostname: hostname},
		})
	}

	// The first creation lands without an answer, and its first read
	// back fails: the next read finds it, and it is the answer.
	landed, err := reserve("landed")
	if err != nil {
		t.Fatalf("a creation that landed without an answer: %v", err)
	}
	<-unsure.lostCreate
	if stored, err := reader.Node(ctx, "landed"); err != nil || stored.VPNIP != landed.VPNIP {
		t.Fatalf("the node that landed: %+v, %v; answered %s", stored.Node, err, landed.VPNIP)
	}
	if events, err := reader.Audit(ctx, joinkeys.AuditQuery{Hostname: "landed"}); err != nil || len(events) != 1 {
		t.Errorf("the landed node's audit events: %+v, %v; want its one", events, err)
	}

	// The second is never sent, and read back as absent, which does not
	// settle it until it can no longer land.
	lost := make(chan error, 1)
	go func() { _, err := reserve("lost"); lost <- err }()
	<-unsure.lostCreate
	other, err := reserve("other")
	if err != nil {
		t.Fatal(err)
	}
	if other.VPNIP == landed.VPNIP || other.VPNIP.String() == "198.18.6.3" {
		t.Errorf("another reservation got %s: the landed node holds %s, the unsettled one 198.18.6.3", other.VPNIP, landed.VPNIP)
	}
	select {
	case err := <-lost:
		t.Fatalf("the unsettled creation answered (%v) while the others ran; it waits until it can no longer land", err)
	default:
	}
	if err := <-lost; !errors.Is(err, errUnreachable) {
		t.Fatalf("a creation that never landed: %v", err)
	}
	again, err := reserve("lost")
	if err != nil || again.VPNIP.String() != "198.18.6.3" {
		t.Errorf("the reservation after the lost one: %s, %v; want its address 198.18.6.3 back", again.VPNIP, err)
	}
	k, err := reader.Key(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if k.Uses != 3 { // landed, other, lost the second time
		t.Errorf("the key's uses: %d, want 3 (the lost creation's use given back)", k.Uses)
	}
}

// claimCutter cuts off a Store's creations of LedgerClaims while cut is
// set.
type claimCutter struct {
	next http.RoundTripper
	cut  atomic.Bool
}

func (c *claimCutter) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgerclaims") {
		return nil, errUnreachable
	}
	return c.next.RoundTrip(r)
}

// TestARestUnrecordedReleasesNothing: a release whose address's rest
// cannot be recorded releases nothing (the node stays, and the release
// can be made again); once made, the next writer's load finds the address
// resting and gives the next node another.
func TestARestUnrecordedReleasesNothing(t *testing.T) {
	ctx := context.Background()
	cutter := &claimCutter{}
	c, ns, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { cutter.next = rt; return cutter })
	pool := joinkeys.MustPool("198.18.11.0/29", "198.18.11.1").Addresses()
	gone, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "resting", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	cutter.cut.Store(true)
	released := time.Now()
	if _, err := s.DeleteNode(ctx, "resting", 0, released); err == nil {
		t.Fatal("a release whose rest could not be recorded answered no error")
	}
	cutter.cut.Store(false)
	if _, err := s.Node(ctx, "resting"); err != nil {
		t.Fatalf("the node after a release that could not record its rest: %v", err)
	}
	if _, err := s.DeleteNode(ctx, "resting", 0, released); err != nil {
		t.Fatalf("the release made again: %v", err)
	}
	next, err := kubestore.New(c.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := next.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, ReleasedBefore: released.Add(-time.Hour),
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "after", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil || n.VPNIP == gone.VPNIP {
		t.Errorf("the next writer's reservation: %s, %v; want another address than the resting %s", n.VPNIP, err, gone.VPNIP)
	}
}

// TestWritesOfUnknownOutcomeAreReadFresh: a revocation and a node's new
// token that landed while their answers were lost, and whose reading
// back failed too, count at once: the writer's reads of that key and
// that node ask the API server instead of its index until one is
// answered.
func TestWritesOfUnknownOutcomeAreReadFresh(t *testing.T) {
	ctx := context.Background()
	unsure := &unsureTransport{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { unsure.next = rt; return unsure })
	if err := s.InsertKey(ctx, joinkeys.KeyRecord{Key: joinkeys.Key{ID: "revoked-unseen", Org: "acme", Kind: joinkeys.KindOrg, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	pool := joinkeys.MustPool("198.18.8.0/29", "198.18.8.1").Addresses()
	n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "retokened", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}, TokenHash: []byte("the first token")}})
	if err != nil {
		t.Fatal(err)
	}
	set := func(lost, nodeReads, keyReads int) {
		unsure.mu.Lock()
		unsure.lostUpdates, unsure.readBacks, unsure.keyReadBacks = lost, nodeReads, keyReads
		unsure.mu.Unlock()
	}

	set(1, 0, 1)
	if _, err := s.RevokeKey(ctx, "revoked-unseen", time.Now()); err == nil {
		t.Fatal("a revocation whose answer was lost answered no error")
	}
	if k, err := s.Key(ctx, "revoked-unseen"); err != nil || k.RevokedAt.IsZero() {
		t.Errorf("the key after a revocation that landed unseen: revoked at %v, %v; want revoked", k.RevokedAt, err)
	}

	set(1, 1, 0)
	n.TokenHash = []byte("the second token")
	if _, err := s.UpdateNode(ctx, n, joinkeys.AuditEvent{}); err == nil {
		t.Fatal("an update whose answer was lost answered no error")
	}
	if got, err := s.Node(ctx, "retokened"); err != nil || string(got.TokenHash) != "the second token" {
		t.Errorf("the node after a new token landed unseen: token hash %q, %v; want the second", got.TokenHash, err)
	}
}

// TestListingsAfterWritesOfUnknownOutcomeAreFresh: what a write of
// unknown outcome landed (a revocation, a node's new token, a release),
// while reading it back failed too, is what the writer's listings and its
// look-up by public key answer, as its reads by name do.
func TestListingsAfterWritesOfUnknownOutcomeAreFresh(t *testing.T) {
	ctx := context.Background()
	unsure := &unsureTransport{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { unsure.next = rt; return unsure })
	if err := s.InsertKey(ctx, joinkeys.KeyRecord{Key: joinkeys.Key{ID: "listed-revoked", Org: "acme", Kind: joinkeys.KindOrg, CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	pool := joinkeys.MustPool("198.18.13.0/29", "198.18.13.1").Addresses()
	reserve := func(hostname string) joinkeys.NodeRecord {
		n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
			Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: hostname, PublicKey: mustKey(t), Status: joinkeys.StatusValidated}, TokenHash: []byte("the first token")}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	retokened, gone := reserve("listed-retokened"), reserve("listed-gone")
	lose := func(set func(u *unsureTransport)) {
		unsure.mu.Lock()
		set(unsure)
		unsure.mu.Unlock()
	}

	lose(func(u *unsureTransport) { u.lostUpdates, u.keyReadBacks = 1, 1 })
	if _, err := s.RevokeKey(ctx, "listed-revoked", time.Now()); err == nil {
		t.Fatal("a revocation whose answer was lost answered no error")
	}
	lose(func(u *unsureTransport) { u.lostUpdates, u.readBacks = 1, 1 })
	retokened.TokenHash = []byte("the second token")
	if _, err := s.UpdateNode(ctx, retokened, joinkeys.AuditEvent{}); err == nil {
		t.Fatal("an update whose answer was lost answered no error")
	}
	lose(func(u *unsureTransport) { u.lostDeletes, u.readBacks = 1, 2 }) // its two reads back fail
	if _, err := s.DeleteNode(ctx, gone.Hostname, 0, time.Now()); err == nil {
		t.Fatal("a release whose answer was lost answered no error")
	}

	keys, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == "listed-revoked" && k.RevokedAt.IsZero() {
			t.Error("Keys lists the key revoked unseen as not revoked")
		}
	}
	nodes, err := s.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, n := range nodes {
		listed = append(listed, n.Hostname)
		if n.Hostname == retokened.Hostname && string(n.TokenHash) != "the second token" {
			t.Errorf("Nodes lists %s with token hash %q; its second landed unseen", n.Hostname, n.TokenHash)
		}
	}
	if slices.Contains(listed, gone.Hostname) {
		t.Errorf("Nodes lists %s, released unseen: %v", gone.Hostname, listed)
	}
	if n, err := s.NodeByPublicKey(ctx, gone.PublicKey); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("NodeByPublicKey of the node released unseen: %s, %v; want ErrNodeNotFound", n.Hostname, err)
	}
}

// TestAnUnreadableUnsureNodeStopsNoOtherRead: a node a write of unknown
// outcome may have changed, and that cannot be read since, is listed as
// the index holds it; the listings and the other nodes' look-ups by
// public key (each join's) neither fail nor wait for it.
func TestAnUnreadableUnsureNodeStopsNoOtherRead(t *testing.T) {
	ctx := context.Background()
	unsure := &unsureTransport{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { unsure.next = rt; return unsure })
	pool := joinkeys.MustPool("198.18.14.0/29", "198.18.14.1").Addresses()
	var nodes []joinkeys.NodeRecord
	for _, hostname := range []string{"unreadable", "other"} {
		n, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
			Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: hostname, PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	unsure.mu.Lock()
	unsure.lostUpdates, unsure.readBacks = 1, 1000 // every read of a node fails from now on
	unsure.mu.Unlock()
	nodes[0].Version = "2.0.0"
	if _, err := s.UpdateNode(ctx, nodes[0], joinkeys.AuditEvent{}); err == nil {
		t.Fatal("an update whose answer was lost answered no error")
	}
	listed, err := s.Nodes(ctx)
	if err != nil || len(listed) != 2 {
		t.Errorf("Nodes with one node unreadable: %d nodes, %v; want both, as the index holds them", len(listed), err)
	}
	if n, err := s.NodeByPublicKey(ctx, nodes[1].PublicKey); err != nil || n.Hostname != "other" {
		t.Errorf("another node by its public key: %q, %v", n.Hostname, err)
	}
	if _, err := s.Node(ctx, "unreadable"); err == nil {
		t.Error("the unreadable node itself, by name: no error; want the read's")
	}
}

// forgetting is a transport whose node deletions, reads and creations
// fail on demand: a deletion sent and its answer lost (lostDelete), reads
// of a node that fail (failedReads), a creation refused (refusedCreate).
type forgetting struct {
	next                      http.RoundTripper
	mu                        sync.Mutex
	lostDelete, refusedCreate bool
	failedReads               int
}

func (f *forgetting) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/ledgernodes/") && f.lostDelete:
		f.lostDelete = false
		resp, err := f.next.RoundTrip(r)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, errUnreachable
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/ledgernodes/") && f.failedReads > 0:
		f.failedReads--
		return nil, errUnreachable
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/ledgernodes") && f.refusedCreate:
		f.refusedCreate = false
		body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"refused","reason":"Forbidden","code":403}`
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	return f.next.RoundTrip(r)
}

// TestAReleaseLearnedLateRests: a node whose deletion landed while its
// answer and the reads after it were lost, and which a later read finds
// gone, leaves its address resting, as after any release: a reservation
// that comes back below it (the mark lowered by an address given back)
// passes it by.
func TestAReleaseLearnedLateRests(t *testing.T) {
	ctx := context.Background()
	f := &forgetting{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	pool := joinkeys.MustPool("198.18.12.0/28", "198.18.12.1").Addresses()
	reserve := func(host string, releasedBefore time.Time) (joinkeys.NodeRecord, error) {
		return s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, ReleasedBefore: releasedBefore,
			Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: host, PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	}
	first, err := reserve("first", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	late, err := reserve("late", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if _, err := s.DeleteNode(ctx, "first", 0, released); err != nil {
		t.Fatal(err)
	}
	// late's deletion lands unseen, and its reads fail: it is unsure,
	// until a read finds it gone.
	f.mu.Lock()
	f.lostDelete, f.failedReads = true, 2
	f.mu.Unlock()
	if _, err := s.DeleteNode(ctx, "late", 0, time.Now()); err == nil {
		t.Fatal("a deletion whose answer and reads were lost answered no error")
	}
	if _, err := s.Node(ctx, "late"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Fatalf("the node whose deletion landed unseen: %v, want ErrNodeNotFound", err)
	}
	// A reservation given first's rested address, then refused, gives
	// it back: the next one looks from there up.
	f.mu.Lock()
	f.refusedCreate = true
	f.mu.Unlock()
	if _, err := reserve("refused", released.Add(time.Second)); err == nil {
		t.Fatal("a refused creation answered no error")
	}
	n, err := reserve("after", released.Add(-time.Hour))
	if err != nil || n.VPNIP == late.VPNIP || n.VPNIP == first.VPNIP {
		t.Errorf("the next reservation: %s, %v; want neither resting address (%s, %s)", n.VPNIP, err, first.VPNIP, late.VPNIP)
	}
}

// TestAnUnknownDeleteIsSettledByARead: a node deletion that landed but
// whose answer was lost is a release: DeleteNode answers the node, and
// its address rests as after any release.
func TestAnUnknownDeleteIsSettledByARead(t *testing.T) {
	ctx := context.Background()
	unsure := &unsureTransport{}
	_, _, s := storeThrough(t, func(rt http.RoundTripper) http.RoundTripper { unsure.next = rt; return unsure })
	pool := joinkeys.MustPool("198.18.7.0/29", "198.18.7.1").Addresses()
	gone, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool,
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "gone", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil {
		t.Fatal(err)
	}
	unsure.mu.Lock()
	unsure.lostDeletes = 1
	unsure.mu.Unlock()
	released := time.Now()
	if n, err := s.DeleteNode(ctx, "gone", 0, released); err != nil || n.VPNIP != gone.VPNIP {
		t.Fatalf("a delete that landed without an answer: %+v, %v", n.Node, err)
	}
	if _, err := s.Node(ctx, "gone"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("the writer still has the deleted node: %v", err)
	}
	next, err := s.ReserveNode(ctx, joinkeys.Reservation{Addresses: pool, ReleasedBefore: released.Add(-time.Hour),
		Node: joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "next", PublicKey: mustKey(t), Status: joinkeys.StatusValidated}}})
	if err != nil || next.VPNIP == gone.VPNIP {
		t.Errorf("the next reservation: %s, %v; want another address than the resting %s", next.VPNIP, err, gone.VPNIP)
	}
}
