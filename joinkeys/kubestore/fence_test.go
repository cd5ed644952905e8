package kubestore_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"gridweave.dev/deploy"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/storetest"
	"gridweave.dev/mesh/wgkey"
)

// fencedLedger is a new ledger fenced by the Lease gridweave-leader in
// its own namespace.
func fencedLedger(t *testing.T) (*testcluster.Cluster, string) {
	t.Helper()
	c, ns := ledger(t)
	fence := kubestore.Fence{LedgerNamespace: ns, LeaseNamespace: ns, LeaseName: "gridweave-leader"}
	if err := kubestore.InstallFence(context.Background(), c.Config, fence); err != nil {
		t.Fatal(err)
	}
	_, binding := kubestore.FenceObjects(fence)
	t.Cleanup(func() {
		_ = c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	return c, ns
}

// TestTheFenceKeepsOneWriter runs the fence on the real API server: while
// a replica holds the Lease only its writes land; once another takes it
// over, the first one's writes are refused (ErrFenced) and write nothing,
// before it has noticed anything; with the Lease released, anyone writes.
func TestTheFenceKeepsOneWriter(t *testing.T) {
	c, ns := fencedLedger(t)
	ctx := context.Background()
	store := func(writer string) *kubestore.Store {
		s, err := kubestore.New(c.Config, ns, &kubestore.Options{Writer: writer})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// replica-a's deletes can be held on their way to the API server.
	gate := &deleteGate{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate }
	a, err := kubestore.New(cfg, ns, &kubestore.Options{Writer: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	b, unsigned := store("replica-b"), store("")
	// reader never writes: it reads the API server, not an index.
	reader := store("reader")
	key := func(id string) joinkeys.KeyRecord {
		now := time.Now().UTC()
		return joinkeys.KeyRecord{Key: joinkeys.Key{ID: id, Kind: joinkeys.KindOrg, Org: "acme", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, SecretHash: []byte("hash")}
	}

	// No Lease yet (no replica started): a migration writes unsigned.
	if err := unsigned.InsertKey(ctx, key("before-any-lease")); err != nil {
		t.Fatalf("no Lease exists, yet: %v", err)
	}

	leases := c.Kube.CoordinationV1().Leases(ns)
	holder := "replica-a"
	lease, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-leader"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	awaitFence(t, b)
	deadline := time.Now().Add(30 * time.Second)
	awaitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.AwaitWrites(awaitCtx); err != nil {
		t.Fatal(err)
	}
	if err := a.InsertKey(ctx, key("by-the-holder")); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	for name, s := range map[string]*kubestore.Store{"replica-b": b, "unsigned": unsigned} {
		if err := s.InsertKey(ctx, key("by-"+name)); !errors.Is(err, joinkeys.ErrFenced) {
			t.Errorf("%s wrote while replica-a holds the Lease: %v", name, err)
		}
		if _, err := reader.Key(ctx, "by-"+name); !errors.Is(err, joinkeys.ErrKeyNotFound) {
			t.Errorf("%s's refused key is in the ledger: %v", name, err)
		}
	}

	// replica-a releases a node; its delete is held on the way, after
	// its mark landed.
	pool := joinkeys.MustPool("198.18.0.0/24", "198.18.0.1").Addresses()
	_, doomedKey, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	reserved := time.Now().UTC()
	if _, err := a.ReserveNode(ctx, joinkeys.Reservation{
		Node:      joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "released-late", PublicKey: doomedKey, Status: joinkeys.StatusValidated, CreatedAt: reserved}},
		Addresses: pool, Now: reserved,
	}); err != nil {
		t.Fatal(err)
	}
	gate.arm()
	deleted := make(chan error, 1)
	go func() {
		_, err := a.DeleteNode(ctx, "released-late", 0, time.Now())
		deleted <- err
	}()
	<-gate.held

	// replica-b takes the Lease over; replica-a has not noticed.
	holder = "replica-b"
	lease.Spec.HolderIdentity = &holder
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the API server's policy sees replica-b hold it (a dry run
	// signed replica-b is admitted), replica-a's held delete reaches it:
	// refused, the node stays, marked.
	nodes := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "ledgernodes"}).Namespace(ns)
	for {
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubestore.Group + "/" + kubestore.Version, "kind": "LedgerEvent",
			"metadata": map[string]any{"name": "probe", "annotations": map[string]any{kubestore.WriterAnnotation: "replica-b"}},
			"spec":     map[string]any{"events": []any{map[string]any{"at": time.Now().UTC().Format(time.RFC3339), "type": "probe"}}},
		}}
		_, err := c.Dynamic.Resource(ledgerEvents).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("the policy never took replica-b's writes: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(gate.release)
	if err := <-deleted; !errors.Is(err, joinkeys.ErrFenced) {
		t.Fatalf("the deposed replica's delete: %v, want ErrFenced", err)
	}
	marked, err := nodes.Get(ctx, "released-late", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deposed replica's refused delete removed the node: %v", err)
	}
	if marked.GetAnnotations()[kubestore.DeletingAnnotation] != "replica-a" {
		t.Fatalf("the node after the refused delete: annotations %v, want replica-a's mark", marked.GetAnnotations())
	}
	// The new writer clears the mark as it loads, so that the fence does
	// not refuse others' deletes of the node for it.
	if err := b.AwaitWrites(awaitCtx); err != nil {
		t.Fatal(err)
	}
	if cleared, err := nodes.Get(ctx, "released-late", metav1.GetOptions{}); err != nil || cleared.GetAnnotations()[kubestore.DeletingAnnotation] != "" {
		t.Fatalf("the node once replica-b loaded: %v, %v; want no mark", cleared.GetAnnotations(), err)
	}
	// An administrator's delete (no mark) is not fenced.
	if err := c.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "joinkeys"}).Namespace(ns).
		Delete(ctx, "before-any-lease", metav1.DeleteOptions{}); err != nil {
		t.Errorf("an administrator's delete while replica-b holds the Lease: %v", err)
	}
	// The holder deletes what the deposed replica marked.
	if _, err := b.DeleteNode(ctx, "released-late", 0, time.Now()); err != nil {
		t.Fatalf("the new holder's delete: %v", err)
	}
	if _, err := reader.Node(ctx, "released-late"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("after the holder's delete: %v", err)
	}

	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	_, err = a.ReserveNode(ctx, joinkeys.Reservation{
		Node:       joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "late-write", PublicKey: pub, Status: joinkeys.StatusValidated, CreatedAt: now}},
		Addresses:  pool,
		SpendKeyID: "by-the-holder",
		Now:        now,
	})
	if !errors.Is(err, joinkeys.ErrFenced) {
		t.Fatalf("the deposed replica's reservation: %v, want ErrFenced", err)
	}
	if _, err := reader.Node(ctx, "late-write"); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("the deposed replica's node is in the ledger: %v", err)
	}
	if k, err := reader.Key(ctx, "by-the-holder"); err != nil || k.Uses != 0 {
		t.Errorf("the deposed replica spent a use of the key: %+v, %v", k, err)
	}
	if _, err := b.ReserveNode(ctx, joinkeys.Reservation{
		Node:       joinkeys.NodeRecord{Node: joinkeys.Node{Hostname: "by-the-new-holder", PublicKey: pub, Status: joinkeys.StatusValidated, CreatedAt: now}},
		Addresses:  pool,
		SpendKeyID: "by-the-holder",
		Now:        now,
	}); err != nil {
		t.Fatalf("the new holder's reservation: %v", err)
	}

	// Released (a replica stopped and gave it up): unfenced again.
	empty := ""
	lease, err = leases.Get(ctx, "gridweave-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = &empty
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := unsigned.AwaitWrites(awaitCtx); err != nil {
		t.Fatalf("with the Lease released: %v", err)
	}
	if holds, err := a.FenceHolds(ctx); err != nil || holds {
		t.Errorf("with the Lease released the fence still refuses writes: %v %v", holds, err)
	}
}

// deleteGate holds, once armed, the next DELETE request until release is
// closed, telling held when it holds it.
type deleteGate struct {
	next    http.RoundTripper
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (g *deleteGate) arm() {
	g.held, g.release = make(chan struct{}), make(chan struct{})
	g.armed.Store(true)
}

func (g *deleteGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodDelete && g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.release
	}
	return g.next.RoundTrip(r)
}

// TestConformanceUnderTheFence runs the Store suite on a fenced ledger
// whose Lease the Store's writer holds, with the ledger's verbs the
// shipped HA Role grants (deploy/kubernetes/ha/rbac-ha.yaml) and no more.
func TestConformanceUnderTheFence(t *testing.T) {
	rules := shippedLedgerRules(t)
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		c, ns := fencedLedger(t)
		ctx := context.Background()
		holder := "the-leader"
		if _, err := c.Kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-leader"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg := bindUser(t, c, ns, "ha-replica", rules)
		s, err := kubestore.New(cfg, ns, &kubestore.Options{Writer: holder})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, err := s.Keys(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err) // RBAC takes a moment to apply
			}
		}
		// Those rules and no others: a key's delete is refused.
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "ha-replica",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Group: kubestore.Group, Resource: "joinkeys", Namespace: ns}}}
		if got, err := c.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{}); err != nil || got.Status.Allowed {
			t.Fatalf("the replica may delete a key (%v): the suite would not run with the shipped rules alone", err)
		}
		awaitFence(t, s)
		awaitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := s.AwaitWrites(awaitCtx); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestTheFenceOutlivesARetiredLedger: InstallFence makes the keeping
// binding, and with a ledger's binding deleted (its ledger retired) the
// fence holds for a ledger bound after it. (The API server can stop
// watching the Leases for good when the policy's last binding goes; the
// keeping binding, which fences nothing, is never the last. This
// sequence alone does not make this API server stop, so the test holds
// the keeper's presence and the fence after a retirement, not the loss
// itself, which the HA tests met when many bindings came and went.)
func TestTheFenceOutlivesARetiredLedger(t *testing.T) {
	ctx := context.Background()
	c, retired := fencedLedger(t)
	keeper, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, kubestore.FenceKeeperBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("InstallFence made no keeping binding: %v", err)
	}
	want := kubestore.FenceKeeper().Spec
	if got := keeper.Spec; got.PolicyName != want.PolicyName || !equality.Semantic.DeepEqual(got.ParamRef, want.ParamRef) ||
		!equality.Semantic.DeepEqual(got.ValidationActions, want.ValidationActions) ||
		got.MatchResources == nil || !equality.Semantic.DeepEqual(got.MatchResources.NamespaceSelector, want.MatchResources.NamespaceSelector) {
		t.Errorf("the keeping binding is %+v, want %+v", got, want)
	}
	_, binding := kubestore.FenceObjects(kubestore.Fence{LedgerNamespace: retired, LeaseNamespace: retired, LeaseName: "gridweave-leader"})
	if err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the API server drops what the binding used

	_, ns := fencedLedger(t)
	holder := "replica-a"
	if _, err := c.Kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := kubestore.New(c.Config, ns, &kubestore.Options{Writer: "replica-b"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		holds, err := other.FenceHolds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if holds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("after another ledger's binding was deleted, the fence of a ledger bound later never refused a replica that does not hold its Lease")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shippedLedgerRules are the rules of the HA Role the deploy files ship
// for the ledger's namespace (gridweave-server-ha in gridweave, bound to
// the replicas' ServiceAccount); no other Role of the file may grant
// anything on the ledger's objects.
func shippedLedgerRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := fs.ReadFile(deploy.Files, "kubernetes/ha/rbac-ha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	bound := false
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		switch kind.Kind {
		case "Role":
			var role rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				if !slices.Contains(r.APIGroups, kubestore.Group) {
					continue
				}
				if role.Name != "gridweave-server-ha" || role.Namespace != "gridweave" {
					t.Fatalf("Role %s/%s grants %v on the ledger's objects; only gridweave/gridweave-server-ha may", role.Namespace, role.Name, r.Verbs)
				}
				rules = append(rules, r)
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			if b.Namespace == "gridweave" && b.RoleRef.Kind == "Role" && b.RoleRef.Name == "gridweave-server-ha" &&
				slices.Contains(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "gridweave-server", Namespace: "gridweave-system"}) {
				bound = true
			}
		}
	}
	if len(rules) == 0 || !bound {
		t.Fatalf("rbac-ha.yaml: %d rules on the ledger's objects, bound to the replicas' ServiceAccount: %v", len(rules), bound)
	}
	return rules
}

// awaitFence waits until the fence refuses, through s, a writer that
// does not hold the Lease: the API server compiles the policy and reads
// the Lease from a cache.
func awaitFence(t *testing.T, s *kubestore.Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		holds, err := s.FenceHolds(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if holds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the fence never refused a replica that does not hold the Lease")
		}
	}
}
