package gridweave_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
)

// TestKubeletTokensOnlyForAdmissibleJoins: in the kubelet join mode,
// validate makes a bootstrap token (a Secret in kube-system) only for a
// request it goes on to admit: an exhausted key, a wrong major version or
// a malformed public key gets validate's refusal and no Secret.
func TestKubeletTokensOnlyForAdmissibleJoins(t *testing.T) {
	ca := testCAPEM(t)
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

// testCAPEM is a self-signed CA certificate, PEM-encoded: the cluster CA
// validate hands out in the kubelet join mode.
func testCAPEM(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
