package gridweave_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/deploy"
	"gridweave.dev/gridweave"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest/validation"
)

// kubeletRBAC is what a server of the kubelet join mode is given:
// rbac.yaml and the server's rules of kubelet/rbac-kubelet.yaml.
func kubeletRBAC(t *testing.T, ns string) []*unstructured.Unstructured {
	return append(shippedRBAC(t, ns), shippedRBACFile(t, "kubernetes/kubelet/rbac-kubelet.yaml", ns)...)
}

// applyMachineBindings applies the machines' bindings of
// rbac-kubelet.yaml (its group subjects), as shipped: cluster-wide names,
// once per control plane.
func applyMachineBindings(t *testing.T, tc *testcluster.Cluster) {
	t.Helper()
	raw, err := fs.ReadFile(deploy.Files, "kubernetes/kubelet/rbac-kubelet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := validation.ReadDocuments("rbac-kubelet.yaml", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		subjects, _, _ := unstructured.NestedSlice(d.Object.Object, "subjects")
		if d.Object.GetKind() != "ClusterRoleBinding" || len(subjects) == 0 || subjects[0].(map[string]any)["kind"] != "Group" {
			continue
		}
		var b rbacv1.ClusterRoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &b); err != nil {
			t.Fatal(err)
		}
		if _, err := tc.Kube.RbacV1().ClusterRoleBindings().Create(context.Background(), &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// kubeletMode configures the kubelet join mode against tc.
func kubeletMode(tc *testcluster.Cluster) func(*gridweave.Config) {
	return func(c *gridweave.Config) {
		c.KubeJoinMode, c.K3sURL, c.KubeletCAPEM = gridweave.JoinModeKubelet, "", tc.Config.CAData
		// No kubelet stops the drained pods here: a short wait.
		c.KubeletDrainTimeout = time.Second
	}
}

// csrFor makes a certificate signing request of Node host's.
func csrFor(t *testing.T, name, signer, host string, ips []string, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + host, Organization: []string{"system:nodes"}}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: signer, Usages: usages, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

// waitApproved waits until the request is approved (or denied: an error).
func waitApproved(tc *testcluster.Cluster, name string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		csr, err := tc.Kube.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range csr.Status.Conditions {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				return nil
			case certificatesv1.CertificateDenied:
				return fmt.Errorf("%s denied: %s", name, c.Message)
			}
		}
	}
	return fmt.Errorf("%s was not approved within 10 s", name)
}

// kubeletSteps are a machine's join in the kubelet join mode, as the
// server sees it.
func kubeletSteps() []step {
	return []step{
		{"validate makes the machine's bootstrap token", func(r *privilegeRun) error {
			_, r.key = r.h.mint("org")
			r.node = newNode(r.t, fmt.Sprintf("rbac-k-%d", r.seq))
			got := r.h.validate(r.node, r.key)
			if err := expect(got, 200, "validate"); err != nil {
				return err
			}
			kubelet, _ := got.body["kubelet"].(map[string]any)
			r.bootstrapToken, _ = kubelet["bootstrap_token"].(string)
			labels, _ := got.body["node_labels"].([]any)
			r.nodeLabels = map[string]string{}
			for _, l := range labels {
				k, v, _ := strings.Cut(fmt.Sprint(l), "=")
				r.nodeLabels[k] = v
			}
			if r.bootstrapToken == "" {
				return fmt.Errorf("validate answered no bootstrap token: %s", got.raw)
			}
			return nil
		}},
		{"the token's first client certificate is approved", func(r *privilegeRun) error {
			cfg := rest.AnonymousClientConfig(r.tc.Config)
			cfg.BearerToken = r.bootstrapToken
			machine, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			name := "rbac-k-client-" + r.ns
			csr := csrFor(r.t, name, certificatesv1.KubeAPIServerClientKubeletSignerName, r.node.hostname, nil,
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
			// The API server knows a bootstrap token once its informer
			// has the token's Secret, an instant after the master made
			// it: an Unauthorized before is asked again, as a kubelet
			// does.
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				_, err := machine.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
				if err == nil {
					break
				}
				if !apierrors.IsUnauthorized(err) || time.Now().After(deadline) {
					return fmt.Errorf("the machine's token asks for its certificate: %w", err)
				}
			}
			r.t.Cleanup(func() {
				_ = r.tc.Kube.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			return waitApproved(r.tc, name)
		}},
		{"the kubelet's serving certificate is approved", func(r *privilegeRun) error {
			cfg, err := r.tc.NodeConfig(r.node.hostname)
			if err != nil {
				return err
			}
			kubelet, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			name := "rbac-k-serving-" + r.ns
			csr := csrFor(r.t, name, certificatesv1.KubeletServingSignerName, r.node.hostname, []string{r.node.vpnIP},
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth)
			if _, err := kubelet.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("the kubelet asks for its serving certificate: %w", err)
			}
			r.t.Cleanup(func() {
				_ = r.tc.Kube.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			return waitApproved(r.tc, name)
		}},
		{"a disconnect drains the machine's Node", func(r *privilegeRun) error {
			ctx := context.Background()
			// The machine's kubelet registers its Node, with the labels
			// validate gave it; a pod is bound to it.
			cfg, err := r.tc.NodeConfig(r.node.hostname)
			if err != nil {
				return err
			}
			kubelet, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.node.hostname, Labels: r.nodeLabels}}
			if _, err := kubelet.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("the kubelet registers its Node: %w", err)
			}
			r.t.Cleanup(func() {
				_ = r.tc.Kube.CoreV1().Nodes().Delete(context.Background(), r.node.hostname, metav1.DeleteOptions{})
			})
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drained", Namespace: r.ns}, Spec: corev1.PodSpec{NodeName: r.node.hostname,
				Containers: []corev1.Container{{Name: "c", Image: "gridweave.dev/podnet:test"}}}}
			if _, err := r.tc.Kube.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return err
			}
			r.t.Cleanup(func() {
				_ = r.tc.Kube.CoreV1().Pods(r.ns).Delete(context.Background(), "drained", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			})
			if err := expect(r.h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": r.node.hostname}), 200, "disconnect"); err != nil {
				return err
			}
			// No kubelet runs here to stop the evicted pod: it stays
			// terminating, and the Node goes at the drain timeout.
			got, err := r.tc.Kube.CoreV1().Pods(r.ns).Get(ctx, "drained", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.DeletionTimestamp == nil {
				return fmt.Errorf("the pod of the disconnected machine's Node was not evicted")
			}
			if _, err := r.tc.Kube.CoreV1().Nodes().Get(ctx, r.node.hostname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the disconnected machine's Node: %v, want not found", err)
			}
			return nil
		}},
	}
}

func (r *privilegeRun) runKubeletSteps() (string, error) {
	// The approver's informer lists the requests as the server starts,
	// in the background: wait for that call (answered or refused), so that
	// it counts as the start's, not as whichever step ran when it came.
	listCSRs := apiCall{"list", "certificatesigningrequests"}
	for deadline := time.Now().Add(30 * time.Second); !r.calls.madeCall(listCSRs); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return "start", fmt.Errorf("the server did not %s within 30 s of its start", listCSRs)
		}
	}
	for _, s := range kubeletSteps() {
		r.calls.setStep(s.name)
		if err := s.run(r); err != nil {
			return s.name, err
		}
	}
	return "", nil
}

// approvalCall is the call that approving needs the signers' approve
// rule for: the API server checks that rule as it takes the approval.
var approvalCall = apiCall{"update", "certificatesigningrequests/approval"}

// TestLeastPrivilegeKubeletMode: the server's rules of
// deploy/kubernetes/kubelet/rbac-kubelet.yaml are least privilege, on
// the real API server, as rbac.yaml's are (TestLeastPrivilege): with them
// a machine's join goes through (its bootstrap token made, its first
// client certificate asked for with that token and approved, its
// kubelet's serving certificate approved) and its disconnect drains its
// Node; every rule is used; and, one at a time, without a rule the step
// that needed it fails with a 403.
// The watch of the requests is the exception: without it the approver
// lists again, later but still correct.
func TestLeastPrivilegeKubeletMode(t *testing.T) {
	tc := testcluster.Shared(t)
	applyMachineBindings(t, tc)
	mode := kubeletMode(tc)
	// Each run's server is stopped before the next starts (subtests): no
	// other run's approver takes part.
	var r *privilegeRun
	t.Run("with the shipped RBAC", func(t *testing.T) {
		r = startPrivilegeRun(t, tc, func(ns string) []*unstructured.Unstructured { return kubeletRBAC(t, ns) }, mode)
		if failed, err := r.runKubeletSteps(); err != nil {
			t.Fatalf("step %q failed: %v", failed, err)
		}
	})
	if t.Failed() {
		return
	}
	granted := grantedCalls(t, shippedRBACFile(t, "kubernetes/kubelet/rbac-kubelet.yaml", "x"))
	full0 := r.calls.snapshot()
	firstStep := map[apiCall]string{}
	var unused []string
	for _, g := range granted {
		made := g
		if g == (apiCall{"approve", "signers"}) {
			made = approvalCall
		}
		step, used := full0.first[made]
		if !used {
			unused = append(unused, g.String())
			continue
		}
		firstStep[g] = step
	}
	if len(unused) > 0 {
		t.Errorf("rules the server never uses (dead weight): %v", unused)
	}
	var made []string
	for c := range full0.first {
		made = append(made, c.String())
	}
	sort.Strings(made)
	t.Logf("the server's API calls: %s", strings.Join(made, ", "))
	for _, g := range granted {
		want, ok := firstStep[g]
		if !ok || g == (apiCall{"watch", "certificatesigningrequests"}) {
			continue
		}
		t.Run("without "+g.String(), func(t *testing.T) {
			r := startPrivilegeRun(t, tc, func(ns string) []*unstructured.Unstructured { return without(kubeletRBAC(t, ns), g) }, mode)
			failed, err := r.runKubeletSteps()
			got := r.calls.snapshot()
			refused := g
			if g == (apiCall{"approve", "signers"}) {
				refused = approvalCall
			}
			switch {
			case err == nil:
				t.Errorf("every step passed without %s", g)
			case failed != want && want != "start": // a call of the approver's start is needed by the first step that waits on it
				t.Errorf("without %s, step %q failed (%v); want step %q", g, failed, err, want)
			case len(got.refused[refused]) == 0:
				t.Errorf("without %s, step %q failed (%v) but the API server refused no %s", g, failed, err, refused)
			default:
				t.Logf("without %s: %q fails: %.160s", g, failed, err.Error())
			}
		})
	}
}
