package gridweave_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestANodesKubernetesNodeSaysWhoseItIs: GET /v1/nodes/{hostname}/kubernetes
// answers owned true for the Node registered with the node's mark (the
// labels validate gave it), false for a Node of its name that carries
// another mark or none, and exists false while there is no Node.
func TestANodesKubernetesNodeSaysWhoseItIs(t *testing.T) {
	h := newHarness(t, nil)
	_, key := h.mint("org")
	own, other, bare, none := newNode(t, "own"), newNode(t, "other"), newNode(t, "bare"), newNode(t, "none")
	labels := map[string]map[string]string{}
	for _, n := range []*node{own, other, bare, none} {
		v := h.want(h.validate(n, key), 200, "validate "+n.hostname)
		labels[n.hostname] = map[string]string{}
		for _, l := range v.body["node_labels"].([]any) {
			k, val, _ := strings.Cut(l.(string), "=")
			labels[n.hostname][k] = val
		}
	}
	nodes := h.fakes.Kube.CoreV1().Nodes()
	for name, l := range map[string]map[string]string{"own": labels["own"], "other": labels["own"], "bare": nil} {
		if _, err := nodes.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		hostname      string
		exists, owned bool
	}{{"own", true, true}, {"other", true, false}, {"bare", true, false}, {"none", false, false}} {
		r := h.want(h.do("GET", "/v1/nodes/"+c.hostname+"/kubernetes", testAdminToken, nil), 200, "the Kubernetes Node of "+c.hostname)
		if r.body["exists"] != c.exists || r.body["owned"] != c.owned {
			t.Errorf("%s: exists %v, owned %v; want %v, %v", c.hostname, r.body["exists"], r.body["owned"], c.exists, c.owned)
		}
	}
}
