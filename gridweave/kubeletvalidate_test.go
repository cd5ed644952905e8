package gridweave_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/tlspin"
)

// TestKubeletTokensOnlyForAdmissibleJoins: in the kubelet join mode,
// validate makes a bootstrap token (a Secret in kube-system) only for a
// request it goes on to admit: an exhausted key, a wrong major version or
// a malformed public key gets validate's refusal and no Secret.
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
	h := newHarness(t, &harnessOptions{config: func(c *gridweave.Config) {
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
	if got := secrets(); got != 1 {
		t.Errorf("%d Secrets after refused joins, want 1 (the admitted join's)", got)
	}
}
