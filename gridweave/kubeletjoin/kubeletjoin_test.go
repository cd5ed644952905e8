package kubeletjoin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestIssueMakesAShortLivedTokenOfTheMachinesGroup(t *testing.T) {
	client := fake.NewClientset()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	token, err := Tokens{Client: client, TTL: 10 * time.Minute, Now: func() time.Time { return now }}.Issue(context.Background(), "gpu-1", "b1nd")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(token) {
		t.Fatalf("token %q is not a bootstrap token", token)
	}
	id, secret, _ := strings.Cut(token, ".")
	s, err := client.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"token-id": id, "token-secret": secret, "expiration": "2026-12-03T12:10:00Z",
		"usage-bootstrap-authentication": "true", "auth-extra-groups": "system:bootstrappers:gridweave,system:bootstrappers:gridweave:node:gpu-1:b1nd"}
	for k, v := range want {
		if s.StringData[k] != v {
			t.Errorf("%s = %q, want %q", k, s.StringData[k], v)
		}
	}
	if s.Type != corev1.SecretTypeBootstrapToken {
		t.Errorf("type %q", s.Type)
	}
	if _, ok := s.StringData["usage-bootstrap-signing"]; ok {
		t.Error("the token signs the cluster-info ConfigMap: it needs not")
	}
	other, err := Tokens{Client: client}.Issue(context.Background(), "gpu-1", "b1nd")
	if err != nil || other == token {
		t.Errorf("a second token: %q, %v", other, err)
	}
}

// request is a signed PEM certificate request.
func request(t *testing.T, cn string, orgs []string, dns []string, ips []string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestApproverApprovesWhatTheMasterDecided(t *testing.T) {
	fleet := map[string]Machine{"gpu-1": {netip.MustParseAddr("198.19.0.5"), "b1"}, "gpu-2": {netip.MustParseAddr("198.19.0.6"), "b2"}}
	machine := func(_ context.Context, h string) (Machine, bool, error) { m, ok := fleet[h]; return m, ok, nil }
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	gwGroups := func(h string) []string {
		return []string{"system:bootstrappers", BootstrapGroup, NodeGroup(h, fleet[h].Binding), "system:authenticated"}
	}
	nodes := []string{"system:nodes", "system:authenticated"}
	cases := []struct {
		name   string
		spec   certificatesv1.CertificateSigningRequestSpec
		want   Decision
		reason string
	}{
		{"a first client certificate with the machine's own token", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef", Groups: gwGroups("gpu-1"),
			Usages: client, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, Approved, ""},
		{"another machine's name with a token made for gpu-1", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef", Groups: gwGroups("gpu-1"),
			Usages: client, Request: request(t, "system:node:gpu-2", []string{"system:nodes"}, nil, nil)}, Denied, "not system:node:gpu-1"},
		{"more groups than the nodes'", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef", Groups: gwGroups("gpu-1"),
			Usages: client, Request: request(t, "system:node:gpu-1", []string{"system:nodes", "system:masters"}, nil, nil)}, Denied, "groups"},
		{"a token of a machine the fleet does not hold", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef", Groups: gwGroups("gpu-9"),
			Usages: client, Request: request(t, "system:node:gpu-9", []string{"system:nodes"}, nil, nil)}, NotOurs, "no machine gpu-9"},
		{"a token of a machine released since (another binding)", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef",
			Groups: []string{"system:bootstrappers", BootstrapGroup, NodeGroup("gpu-1", "old"), "system:authenticated"},
			Usages: client, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, NotOurs, "of this token"},
		{"a server usage on a client certificate", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:abcdef", Groups: gwGroups("gpu-1"),
			Usages: append(client, certificatesv1.UsageServerAuth), Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, Denied, "not a kubelet's"},
		{"another bootstrap token's request", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:bootstrap:kubeadm", Groups: []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"},
			Usages: client, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, NotOurs, ""},
		{"a renewal", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: "system:node:gpu-1", Groups: nodes,
			Usages: client, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, NotOurs, ""},
		{"a serving certificate for the machine's VPN address", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:gpu-1", Groups: nodes,
			Usages: serving, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, []string{"gpu-1"}, []string{"198.19.0.5"})}, Approved, ""},
		{"a serving certificate for another address", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:gpu-1", Groups: nodes,
			Usages: serving, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, []string{"gpu-1"}, []string{"198.19.0.5", "198.19.0.6"})}, Denied, "198.19.0.6"},
		{"a serving certificate for another name", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:gpu-1", Groups: nodes,
			Usages: serving, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, []string{"kubernetes.default"}, []string{"198.19.0.5"})}, Denied, "kubernetes.default"},
		{"a serving certificate of a Node that is not the fleet's", certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:cpu-7", Groups: nodes,
			Usages: serving, Request: request(t, "system:node:cpu-7", []string{"system:nodes"}, nil, []string{"10.0.0.7"})}, NotOurs, ""},
		{"another signer", certificatesv1.CertificateSigningRequestSpec{
			SignerName: "example.com/signer", Username: "system:node:gpu-1", Groups: nodes,
			Usages: serving, Request: request(t, "system:node:gpu-1", []string{"system:nodes"}, nil, nil)}, NotOurs, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-" + string(rune('a'+i))}, Spec: c.spec}
			kube := fake.NewClientset(csr)
			a := &Approver{Client: kube, Machine: machine}
			got, reason, err := a.Review(context.Background(), csr)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || !strings.Contains(reason, c.reason) {
				t.Fatalf("Review = %s (%s), want %s (%q)", got, reason, c.want, c.reason)
			}
			stored, err := kube.CertificatesV1().CertificateSigningRequests().Get(context.Background(), csr.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var conds []certificatesv1.RequestConditionType
			for _, cond := range stored.Status.Conditions {
				conds = append(conds, cond.Type)
			}
			want := map[Decision][]certificatesv1.RequestConditionType{Approved: {certificatesv1.CertificateApproved}, Denied: {certificatesv1.CertificateDenied}}[c.want]
			if len(conds) != len(want) || len(want) == 1 && conds[0] != want[0] {
				t.Errorf("conditions %v, want %v", conds, want)
			}
			if again, _, _ := a.Review(context.Background(), stored); len(want) == 1 && again != Decided {
				t.Errorf("a decided request reviewed again: %s", again)
			}
		})
	}
}
