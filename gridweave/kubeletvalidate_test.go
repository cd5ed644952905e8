package gridweave_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/mesh/wgkey"
)

// TestKubeletTokensOnlyForAdmissibleJoins: in the kubelet join mode,
// validate makes a bootstrap token (a Secret in kube-system) only for a
// request it admits: an exhausted key, a wrong major version, a malformed
// public key, a hostname another machine holds or a peer the mesh refuses
// gets validate's refusal and no Secret; and a token that cannot be made
// undoes the join (its reservation, its peer and its key's use).
func TestKubeletTokensOnlyForAdmissibleJoins(t *testing.T) {
	// Any PEM certificate stands for the cluster CA here: validate only
	// hands it out. The server's own self-signed one will do.
	dir := t.TempDir()
	if _, err := tlspin.LoadOrCreate(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), nil); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	_, masterKey, _ := wgkey.GeneratePair()
	m := newRefusingMesh(masterKey)
	h := newHarness(t, &harnessOptions{mesh: m, config: func(c *gridweave.Config) {
		c.KubeJoinMode, c.K3sURL, c.KubeletCAPEM = gridweave.JoinModeKubelet, "", ca
	}})
	secrets := func() int {
		t.Helper()
		list, err := h.fakes.Kube.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	r := h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600, "max_uses": 1}), 201, "a one-use key")
	key := r.body["key"].(string)
	first := newNode(t, "first")
	if v := h.want(h.validate(first, key), 200, "the key's one join"); v.body["kubelet"] == nil {
		t.Fatalf("validate in the kubelet mode answered no kubelet join: %s", v.raw)
	}
	if got := secrets(); got != 1 {
		t.Fatalf("%d Secrets after one join, want its bootstrap token's", got)
	}
	second := newNode(t, "second")
	if r := h.want(h.validate(second, key), 401, "a second join with the used key"); r.errorField("code") != "join_key_exhausted" {
		t.Errorf("a second join with the used key: %s", r.raw)
	}
	// A usable key, and a request validate refuses for another field.
	_, usable := h.mint("org")
	for _, bad := range []struct {
		what string
		body map[string]any
		want int
	}{
		{"another major version", map[string]any{"key": usable, "hostname": "third", "public_key": second.public, "version": "2.0.0"}, 426},
		{"a malformed public key", map[string]any{"key": usable, "hostname": "third", "public_key": "not-a-key", "version": "1.4.2"}, 400},
		{"a malformed hostname", map[string]any{"key": usable, "hostname": "Third_", "public_key": second.public, "version": "1.4.2"}, 400},
	} {
		h.want(h.do("POST", "/v1/nodes/validate", "", bad.body), bad.want, bad.what)
	}
	// Refused after the checks that come before the reservation: the
	// hostname is another machine's, or the mesh refuses the peer.
	h.want(h.validate(newNode(t, "first"), usable), 409, "a hostname another machine holds")
	m.refuse.Store(true)
	h.want(h.validate(newNode(t, "refused"), usable), 500, "a peer the mesh refuses")
	m.refuse.Store(false)
	if got := secrets(); got != 1 {
		t.Errorf("%d Secrets after refused joins, want 1 (the admitted join's)", got)
	}

	// The token cannot be made: the join is undone, and the one-use
	// key's use given back, so the machine tries again with its key.
	r = h.want(h.do("POST", "/v1/nodes/join-keys", testAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 600, "max_uses": 1}), 201, "another one-use key")
	oneUse := r.body["key"].(string)
	var refuseSecrets atomic.Bool
	refuseSecrets.Store(true)
	h.fakes.Kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuseSecrets.Load() {
			return true, nil, errors.New("the API server is away")
		}
		return false, nil, nil
	})
	late := newNode(t, "late")
	if r := h.validate(late, oneUse); r.status < 500 {
		t.Fatalf("validate with no bootstrap token to give: %d %s, want a 5xx", r.status, r.raw)
	}
	if _, err := h.kr.Node(context.Background(), "late"); err == nil {
		t.Error("the reservation stayed although its bootstrap token could not be made")
	}
	peers, err := h.mesh.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if p.PublicKey.String() == late.public {
			t.Errorf("the peer of a join undone for its bootstrap token stayed: %v", p)
		}
	}
	refuseSecrets.Store(false)
	if v := h.want(h.validate(late, oneUse), 200, "the same one-use key once tokens can be made"); v.body["kubelet"] == nil {
		t.Fatalf("validate in the kubelet mode answered no kubelet join: %s", v.raw)
	}
	if got := secrets(); got != 2 {
		t.Errorf("%d Secrets after two admitted joins, want 2", got)
	}
}
