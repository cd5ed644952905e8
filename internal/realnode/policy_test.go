package realnode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// TestAKubeletCannotChooseItsPodCIDR: with the kubelet join mode's
// files applied, a node's kubelet (a user of system:nodes) can neither
// create its Node with a pod CIDR nor change the one the
// controller-manager gave it, while the controller-manager still
// allocates it and the kubelet still updates the rest of its Node.
func TestAKubeletCannotChooseItsPodCIDR(t *testing.T) {
	tc := underKubeletPolicy(t)
	ctx := context.Background()
	const name = "chooses-its-cidr"
	nodes := asKubelet(t, tc, name).CoreV1().Nodes()
	t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	chosen := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: "198.18.120.0/24", PodCIDRs: []string{"198.18.120.0/24"}}}
	// The API server takes a new policy in within a moment.
	err := waitFor(30*time.Second, func() error {
		_, err := nodes.Create(ctx, chosen, metav1.CreateOptions{})
		if err == nil {
			_ = tc.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			return errors.New("the kubelet created its Node with a pod CIDR of its choosing")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, chosen, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not create its Node with a pod CIDR") {
		t.Fatalf("a kubelet's Node with a pod CIDR of its own: %v, want the policy's refusal", err)
	}

	// A Node's pod CIDR changes only from "" (the Node's validation), so
	// the kubelet sets it right after its create, before the
	// controller-manager allocates one; a try that came too late (the
	// allocation was first) is made again with another Node.
	refused := false
	for try := range 10 {
		late := fmt.Sprintf("%s-%d", name, try)
		t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), late, metav1.DeleteOptions{}) })
		kubelet := asKubelet(t, tc, late).CoreV1().Nodes()
		created, err := kubelet.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: late}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a kubelet's Node without a pod CIDR: %v", err)
		}
		created.Spec.PodCIDR, created.Spec.PodCIDRs = "198.18.121.0/24", []string{"198.18.121.0/24"}
		_, err = kubelet.Update(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) || taintedFirst(err) {
			continue // the controller-manager was first
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not change its Node's pod CIDR") {
			t.Fatalf("a kubelet's pod CIDR of its choosing on its Node: %v, want the policy's refusal", err)
		}
		refused = true
		break
	}
	if !refused {
		t.Fatal("the controller-manager allocated every Node's pod CIDR before its kubelet could try to set one")
	}

	// The controller-manager allocates, and the kubelet updates the rest.
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a kubelet's Node without a pod CIDR: %v", err)
	}
	var allocated *corev1.Node
	if err := waitFor(30*time.Second, func() error {
		allocated, err = nodes.Get(ctx, name, metav1.GetOptions{})
		if err == nil && allocated.Spec.PodCIDR == "" {
			err = errors.New("the controller-manager gave the Node no pod CIDR")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := labelNode(ctx, nodes, name, map[string]any{"example.com/rack": "r1"}); err != nil {
		t.Errorf("a kubelet's update of its Node's labels, its pod CIDR kept: %v", err)
	}
}

// taintedFirst reports whether err is NodeRestriction's refusal of a
// kubelet's update that would take off a taint the controller-manager
// put on the Node after the kubelet read it (not-ready, say): the
// kubelet's copy was behind, as with a conflict.
func taintedFirst(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is not allowed to modify taints")
}

// labelNode sets labels on the Node (nil removes one) as a kubelet does:
// a merge patch of its labels alone, so that what the controllers write
// in between (the pod CIDR, taints) is neither a conflict nor taken off.
func labelNode(ctx context.Context, nodes typedcorev1.NodeInterface, name string, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// underKubeletPolicy is the shared test control plane with the kubelet
// join mode's files applied (realnode.ApplyKubeletRBAC).
func underKubeletPolicy(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("the test control plane; run make test")
	}
	tc := testcluster.Shared(t)
	if err := realnode.ApplyKubeletRBAC(context.Background(), tc.Kube); err != nil {
		t.Fatal(err)
	}
	return tc
}

// asKubelet is a client of tc as the kubelet of the node name (its user
// and the group system:nodes).
func asKubelet(t *testing.T, tc *testcluster.Cluster, name string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(tc.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"system:nodes", "system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAKubeletKeepsItsMark: with the kubelet join mode's files applied, a
// node's kubelet can neither change nor remove the Gridweave mark its Node
// was registered with, while it still changes its other labels; a Node
// registered without a mark is not held to one.
func TestAKubeletKeepsItsMark(t *testing.T) {
	tc := underKubeletPolicy(t)
	ctx := context.Background()
	const marked, unmarked, mark = "keeps-its-mark", "has-no-mark", fleet.MarkLabel
	for _, name := range []string{marked, unmarked} {
		t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	nodes := asKubelet(t, tc, marked).CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: marked, Labels: map[string]string{mark: "0123abcd"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	relabel := func(labels map[string]any) error { return labelNode(ctx, nodes, marked, labels) }
	// The API server takes a new policy in within a moment.
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may not change or remove its Node's Gridweave mark")
	}
	if err := waitFor(30*time.Second, func() error {
		err := relabel(map[string]any{mark: "another-mark"})
		switch {
		case err == nil:
			_ = relabel(map[string]any{mark: "0123abcd"})
			return errors.New("the kubelet changed its Node's mark")
		case !refused(err):
			return err // a conflict with the controller-manager's pod CIDR, say
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for what, change := range map[string]map[string]any{
		"changed": {mark: "another-mark"},
		"removed": {mark: nil},
	} {
		if err := relabel(change); !refused(err) {
			t.Errorf("a kubelet's mark %s: %v, want the policy's refusal", what, err)
		}
	}
	if err := relabel(map[string]any{"example.com/rack": "r2"}); err != nil {
		t.Errorf("a kubelet's other label, its mark kept: %v", err)
	}
	other := asKubelet(t, tc, unmarked).CoreV1().Nodes()
	if _, err := other.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: unmarked, Labels: map[string]string{"example.com/rack": "r1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := labelNode(ctx, other, unmarked, map[string]any{"example.com/rack": "r3"}); err != nil {
		t.Errorf("a Node registered without a mark, relabeled: %v", err)
	}
}
