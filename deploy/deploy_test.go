package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/deploy"
	"gridweave.dev/examples/server/serverenv"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/master"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/manifest/validation"
	"gridweave.dev/rayctl"
)

func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }

// kubernetesDocuments reads the shipped manifests in apply order.
func kubernetesDocuments(t *testing.T) []validation.Document {
	t.Helper()
	docs := readDocuments(t, "namespace.yaml", "rbac.yaml", "server.yaml")
	if entries, _ := fs.ReadDir(deploy.Files, "kubernetes"); len(entries) != 6 {
		t.Errorf("kubernetes/ has %d entries; apply order lists 3 files, ha/, kubelet/ and gpu-metrics/", len(entries))
	}
	return docs
}

// haDocuments reads the HA variant's manifests in apply order.
func haDocuments(t *testing.T) []validation.Document {
	t.Helper()
	docs := readDocuments(t, "namespace.yaml", "ha/ledger-crds.yaml", "ha/ledger-fence.yaml", "rbac.yaml", "ha/rbac-ha.yaml", "ha/server-ha.yaml")
	if entries, _ := fs.ReadDir(deploy.Files, "kubernetes/ha"); len(entries) != 4 {
		t.Errorf("kubernetes/ha has %d files; apply order lists 4", len(entries))
	}
	return docs
}

func readDocuments(t *testing.T, names ...string) []validation.Document {
	t.Helper()
	var docs []validation.Document
	for _, name := range names {
		raw, err := fs.ReadFile(deploy.Files, "kubernetes/"+name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := validation.ReadDocuments("kubernetes/"+name, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d...)
	}
	return docs
}

// objectsOf are the documents' objects, in order.
func objectsOf(docs []validation.Document) []*unstructured.Unstructured {
	objs := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		objs[i] = d.Object
	}
	return objs
}

// applier server-side applies objects of any kind to tc, as kubectl
// apply would.
func applier(t *testing.T, tc *testcluster.Cluster) *rayctl.Client {
	t.Helper()
	rc, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rc.WithDynamic(tc.Dynamic)
}

// TestManifestsLintClean: our own lint finds nothing in what we ship.
func TestManifestsLintClean(t *testing.T) {
	docs := append(kubernetesDocuments(t), haDocuments(t)[1:]...)
	docs = append(docs, readDocuments(t, "kubelet/rbac-kubelet.yaml", "kubelet/node-pod-cidr-policy.yaml", "gpu-metrics/dcgm-exporter.yaml")...)
	if findings := validation.Lint(validation.NewValidator(), docs); len(findings) != 0 {
		for _, f := range findings {
			t.Error(f)
		}
	}
}

// TestSystemdUnitVerifies: systemd-analyze verify accepts the unit without
// a warning (with its binary and environment file in place), and its
// security exposure stays "OK" (at most 2.5 of 10).
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server and runs systemd-analyze; run make test")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd package; .ci/run installs it): %v", err)
	}
	raw, err := fs.ReadFile(deploy.Files, "systemd/gridweave-server.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "gridweave-server")
	if out, err := exec.Command("go", "build", "-o", binary, "../examples/server").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	env, _ := fs.ReadFile(deploy.Files, "systemd/server.env.example")
	if err := os.WriteFile(filepath.Join(dir, "server.env"), env, 0o600); err != nil {
		t.Fatal(err)
	}
	unit := strings.NewReplacer("/usr/local/bin/gridweave-server", binary, "/etc/gridweave/server.env", filepath.Join(dir, "server.env")).Replace(string(raw))
	path := filepath.Join(dir, "gridweave-server.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=25", path).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		t.Errorf("systemd-analyze security: %v\n%s", err, out)
	}
	t.Log(lines[len(lines)-1])
}

// TestManifestsAreAdmittedAndBound applies the shipped manifests to the
// real API server (server-side apply): every object is admitted, the
// server's pod lands on the control-plane node (kwok), and the
// ServiceAccount may do what the server does and nothing more.
func TestManifestsAreAdmittedAndBound(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := tc.AddNode(ctx, "master", nil, map[string]string{"node-role.kubernetes.io/control-plane": "true"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, "worker", nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	objs := objectsOf(kubernetesDocuments(t))
	rc := applier(t, tc)
	if _, err := rc.Apply(ctx, objs[:1], rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-server", Namespace: "gridweave-system"},
		StringData: map[string]string{"ADMIN_TOKEN": strings.Repeat("a", 40), "JWT_SECRET": strings.Repeat("j", 40)}}
	if _, err := tc.Kube.CoreV1().Secrets("gridweave-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Apply(ctx, objs[1:], rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		pods, err := tc.Kube.CoreV1().Pods("gridweave-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gridweave-server"})
		if err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning {
			pod = pods.Items[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's pod is not running: %+v", pods)
		}
	}
	if pod.Spec.NodeName != "master" {
		t.Errorf("the server runs on %s, want the control-plane node", pod.Spec.NodeName)
	}
	// The Ray workloads' namespace refuses a privileged pod (Pod Security
	// baseline): only the server's namespace is privileged.
	privileged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "host-net", Namespace: "gridweave"}, Spec: corev1.PodSpec{HostNetwork: true,
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := tc.Kube.CoreV1().Pods("gridweave").Create(ctx, privileged, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
		t.Error("the Ray workloads' namespace admits a host-network pod")
	}
	sa := "system:serviceaccount:gridweave-system:gridweave-server"
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "ray.io", Resource: "rayclusters", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "ray.io", Resource: "rayclusters", Namespace: "default"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "gridweave-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "ray.io", Resource: "rayclusters", Namespace: "gridweave-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "patch", Group: "gridweave.dev", Resource: "gridweavejobs", Subresource: "status", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Resource: "nodes"}, false},
	} {
		if allowed(t, ctx, tc, sa, c.attrs) != c.want {
			t.Errorf("%s may %s %s/%s in %q: %v", sa, c.attrs.Verb, c.attrs.Resource, c.attrs.Subresource, c.attrs.Namespace, !c.want)
		}
	}
}

// TestShippedPlaceholdersAreRefused: server.env.example, started as it is
// shipped, is refused, naming a secret to fill in (a copied example never
// runs a master with published secrets).
func TestShippedPlaceholdersAreRefused(t *testing.T) {
	raw, err := fs.ReadFile(deploy.Files, "systemd/server.env.example")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	cfg, err := serverenv.Read(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	err = serverenv.Explain(cfg.Check())
	var ce *serverenv.Error
	if !errors.As(err, &ce) || (ce.Variable != "JWT_SECRET" && ce.Variable != "ADMIN_TOKEN") {
		t.Errorf("the shipped example starts: %v", err)
	}
}

// TestDeployFilesSetWhatTheServerReads: every variable a deploy file sets
// (the Deployment's env, the systemd unit's Environment= and the example
// server.env, its commented options too) is one the server reads, and
// both deploy paths wire the join end to end: k3s, DCGM targets, the
// worker image.
func TestDeployFilesSetWhatTheServerReads(t *testing.T) {
	read := map[string]bool{"KUBECONFIG": true, "POD_NAME": true} // the program's own, beside the configuration
	if _, err := serverenv.Read(func(k string) string { read[k] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	set := map[string]map[string]bool{} // file -> variables
	add := func(file, name string) {
		if set[file] == nil {
			set[file] = map[string]bool{}
		}
		set[file][name] = true
	}
	for file, docs := range map[string][]validation.Document{"kubernetes/server.yaml": kubernetesDocuments(t), "kubernetes/ha/server-ha.yaml": haDocuments(t)} {
		for _, d := range docs {
			if d.Object.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(d.Object.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
				for _, e := range env {
					add(file, e.(map[string]any)["name"].(string))
				}
			}
		}
	}
	example, _ := fs.ReadFile(deploy.Files, "systemd/server.env.example")
	for _, line := range strings.Split(string(example), "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if k, _, ok := strings.Cut(line, "="); ok && k != "" && strings.ToUpper(k) == k && !strings.ContainsAny(k, " :/") {
			add("systemd", k)
		}
	}
	unit, _ := fs.ReadFile(deploy.Files, "systemd/gridweave-server.service")
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "Environment="); ok {
			for _, kv := range strings.Fields(rest) {
				k, _, _ := strings.Cut(kv, "=")
				add("systemd", k)
			}
		}
	}
	for file, vars := range set {
		for v := range vars {
			if !read[v] {
				t.Errorf("%s sets %s, which the server does not read", file, v)
			}
		}
		want := []string{"K3S_URL", "K3S_AGENT_TOKEN_FILE", "DCGM_TARGETS_DIR", "WORKER_IMAGE_TAR", "ADMIN_TOKEN", "JWT_SECRET", "KUBERAY_DB"}
		if strings.Contains(file, "/ha/") {
			// The replicas share the JWT secret in a Secret of their own.
			want = append(slices.DeleteFunc(want, func(v string) bool { return v == "JWT_SECRET" }), "KUBERAY_STORE", "POD_NAME", "REPLICA_ADDR")
		}
		for _, v := range want {
			if !vars[v] {
				t.Errorf("%s does not set %s", file, v)
			}
		}
	}
	if len(set) != 3 {
		t.Fatalf("read the variables of %d deploy paths, want 3: %v", len(set), set)
	}
}

// TestHAManifestsAreAdmittedAndBound applies the HA variant to the real
// API server: its CRDs are the ones the server installs, the three
// replicas land on three control-plane nodes, the PodDisruptionBudget
// keeps two, and the ServiceAccount may use the ledger (never rewriting
// its audit trail), the Lease, the hub's ConfigMap and the shared Secret,
// and read no other Secret.
func TestHAManifestsAreAdmittedAndBound(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	docs := haDocuments(t)
	crds, err := kubestore.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, d := range docs {
		if d.Object.GetKind() == "CustomResourceDefinition" {
			shipped[d.Object.GetName()] = true
			var want *apiextensionsv1.CustomResourceDefinition
			for _, c := range crds {
				if c.Name == d.Object.GetName() {
					want = c
				}
			}
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, got); err != nil {
				t.Fatal(err)
			}
			if want == nil || !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("ha/ledger-crds.yaml's %s is not the one the server installs", d.Object.GetName())
			}
		}
	}
	if len(shipped) != len(crds) {
		t.Errorf("ha/ledger-crds.yaml holds %d CRDs, the server installs %d", len(shipped), len(crds))
	}
	// The fence is the one the server installs for its defaults.
	policy, binding := kubestore.FenceObjects(kubestore.Fence{LedgerNamespace: "gridweave", LeaseNamespace: "gridweave-system", LeaseName: "gridweave-leader"})
	fences := 0
	for _, d := range docs {
		var got, want any
		switch d.Object.GetKind() {
		case "ValidatingAdmissionPolicy":
			got, want = &admissionregistrationv1.ValidatingAdmissionPolicy{}, policy
		case "ValidatingAdmissionPolicyBinding":
			got, want = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, binding
			if d.Object.GetName() == kubestore.FenceKeeperBinding {
				want = kubestore.FenceKeeper()
			}
		default:
			continue
		}
		fences++
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("ha/ledger-fence.yaml's %s %s is not the one the server installs", d.Object.GetKind(), d.Object.GetName())
		}
	}
	if fences != 3 {
		t.Errorf("ha/ledger-fence.yaml holds %d objects of the fence, want the policy, its binding and the keeping binding", fences)
	}
	for i := range 3 {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("master-%d", i), nil, map[string]string{"node-role.kubernetes.io/control-plane": "true"}, ""); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The namespaces exist when TestManifestsAreAdmittedAndBound ran
	// first: the same objects, applied again.
	objs := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		objs[i] = d.Object
		if d.Object.GetKind() == "Deployment" {
			objs[i] = d.Object.DeepCopy()
			objs[i].SetName("gridweave-server-ha")
			_ = unstructured.SetNestedField(objs[i].Object, map[string]any{"app.kubernetes.io/name": "gridweave-server-ha"}, "spec", "selector", "matchLabels")
			_ = unstructured.SetNestedField(objs[i].Object, map[string]any{"app.kubernetes.io/name": "gridweave-server-ha"}, "spec", "template", "metadata", "labels")
			terms, _, _ := unstructured.NestedSlice(objs[i].Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
			term := terms[0].(map[string]any)
			_ = unstructured.SetNestedField(term, map[string]any{"app.kubernetes.io/name": "gridweave-server-ha"}, "labelSelector", "matchLabels")
			_ = unstructured.SetNestedSlice(objs[i].Object, []any{term}, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
		}
	}
	rc := applier(t, tc)
	if _, err := rc.Apply(ctx, objs[:1], rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-server", Namespace: "gridweave-system"},
		StringData: map[string]string{"ADMIN_TOKEN": strings.Repeat("a", 40)}}
	if _, err := tc.Kube.CoreV1().Secrets("gridweave-system").Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := rc.Apply(ctx, objs[1:], rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		pods, err := tc.Kube.CoreV1().Pods("gridweave-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gridweave-server-ha"})
		nodes := map[string]bool{}
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Spec.NodeName, "master-") {
					nodes[p.Spec.NodeName] = true
				}
			}
		}
		if len(nodes) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas are not running on three control-plane nodes: %v", nodes)
		}
	}
	pdb, err := tc.Kube.PolicyV1().PodDisruptionBudgets("gridweave-system").Get(ctx, "gridweave-server", metav1.GetOptions{})
	if err != nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget %+v, %v", pdb, err)
	}
	sa := "system:serviceaccount:gridweave-system:gridweave-server"
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "create", Group: kubestore.Group, Resource: "ledgerclaims", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: kubestore.Group, Resource: "ledgernodes", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: kubestore.Group, Resource: "ledgerclaims", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: kubestore.Group, Resource: "ledgerevents", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: kubestore.Group, Resource: "ledgerevents", Namespace: "gridweave"}, true},
		// A prune rewrites the batch it keeps part of, and marks what it
		// deletes (TestConformanceUnderTheFence runs with these rules).
		{authorizationv1.ResourceAttributes{Verb: "update", Group: kubestore.Group, Resource: "ledgerevents", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: kubestore.Group, Resource: "podcidrtables", Namespace: "gridweave"}, true},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: kubestore.Group, Resource: "podcidrtables", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: kubestore.Group, Resource: "joinkeys", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Group: kubestore.Group, Resource: "ledgerevents", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "gridweave-leader", Namespace: "gridweave-system"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "other", Namespace: "gridweave-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Name: "gridweave-master", Namespace: "gridweave-system"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Name: "other", Namespace: "gridweave-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "gridweave-system"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Resource: "configmaps", Name: "gridweave-hub", Namespace: "gridweave-system"}, true},
		{authorizationv1.ResourceAttributes{Verb: "update", Resource: "configmaps", Name: "other", Namespace: "gridweave-system"}, false},
		// Nothing of the master's own in the workloads' namespace.
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Name: "gridweave-master", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Name: "gridweave-leader", Namespace: "gridweave"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: kubestore.Group, Resource: "ledgerclaims", Namespace: "default"}, false},
	} {
		if allowed(t, ctx, tc, sa, c.attrs) != c.want {
			t.Errorf("%s may %s %s %s in %q: %v", sa, c.attrs.Verb, c.attrs.Resource, c.attrs.Name, c.attrs.Namespace, !c.want)
		}
	}
}

// TestTheIdentityIsApartFromTheWorkloads: someone with the built-in edit
// role in the workloads' namespace (a data scientist who runs RayClusters
// there) reads that namespace's Secrets, but not the master's identity,
// which the HA replicas keep in their own namespace.
func TestTheIdentityIsApartFromTheWorkloads(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	for _, ns := range []string{"gridweave", "gridweave-system"} {
		if err := tc.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "data-scientist-edit", Namespace: "gridweave"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "data-scientist"}}}
	if _, err := tc.Kube.RbacV1().RoleBindings("gridweave").Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Kube.RbacV1().RoleBindings("gridweave").Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	secret := func(ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Name: "gridweave-master", Namespace: ns}
	}
	// The edit role reads Secrets where it is bound: a Secret kept there
	// would be read. (The controller-manager aggregates the edit role's
	// rules a moment after the control plane starts.)
	for deadline := time.Now().Add(30 * time.Second); !allowed(t, ctx, tc, "data-scientist", secret("gridweave")); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edit role does not read Secrets in its namespace: this test proves nothing")
		}
	}
	if allowed(t, ctx, tc, "data-scientist", secret("gridweave-system")) {
		t.Error("the edit role in the workloads' namespace reads the master's identity")
	}
	// And the replicas keep it there: GRIDWEAVE_SYSTEM_NAMESPACE's default,
	// the HA Deployment's namespace, is not KUBERAY_NAMESPACE's.
	cfg, err := serverenv.Read(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SystemNamespace != "gridweave-system" || cfg.Namespace != "gridweave" {
		t.Errorf("the defaults keep the identity in %q and the workloads in %q", cfg.SystemNamespace, cfg.Namespace)
	}
}

// allowed asks the API server whether user may do what attrs say.
func allowed(t *testing.T, ctx context.Context, tc *testcluster.Cluster, user string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
	got, err := tc.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// TestDCGMExporterRunsOnThePoolsOnly applies the DCGM exporter's manifest
// to the real API server (its Pod Security admission, the DaemonSet
// controller): the exporter runs on a machine the fleet put in a GPU pool
// (the pool label the server sets), on the host network, listening on the
// node's address at the port the scrape targets name, and on no other
// machine.
func TestDCGMExporterRunsOnThePoolsOnly(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gpu, cpu := "dcgm-gpu-machine", "dcgm-cpu-machine"
	gpuAlloc := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	if _, err := tc.AddNode(ctx, gpu, gpuAlloc, map[string]string{fleet.NodePoolLabel: "h100-80gb-hbm3"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, cpu, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := applier(t, tc).Apply(ctx, objectsOf(readDocuments(t, "gpu-metrics/dcgm-exporter.yaml")), rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Kube.CoreV1().Namespaces().Delete(context.Background(), "gridweave-gpu-metrics", metav1.DeleteOptions{})
		for _, n := range []string{gpu, cpu} {
			_ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	var onGPU *corev1.Pod
	for deadline := time.Now().Add(90 * time.Second); onGPU == nil; time.Sleep(250 * time.Millisecond) {
		pods, err := tc.Kube.CoreV1().Pods("gridweave-gpu-metrics").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=dcgm-exporter"})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pods.Items {
			if p.Spec.NodeName == gpu && p.Status.Phase == corev1.PodRunning {
				onGPU = &pods.Items[i]
			}
		}
		if time.Now().After(deadline) {
			ds, _ := tc.Kube.AppsV1().DaemonSets("gridweave-gpu-metrics").Get(ctx, "dcgm-exporter", metav1.GetOptions{})
			events, _ := tc.Kube.CoreV1().Events("gridweave-gpu-metrics").List(ctx, metav1.ListOptions{})
			t.Fatalf("no exporter running on the pool's machine: pods %+v\nDaemonSet status %+v\nevents %+v", pods.Items, ds.Status, events.Items)
		}
	}
	// The controller has decided for both machines once it scheduled one.
	pods, err := tc.Kube.CoreV1().Pods("gridweave-gpu-metrics").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == cpu {
			t.Errorf("an exporter runs on %s, which is in no GPU pool", cpu)
		}
	}
	c := onGPU.Spec.Containers[0]
	listen := map[string]string{}
	for _, e := range c.Env {
		listen[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			listen[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	if !onGPU.Spec.HostNetwork || listen["NODE_IP"] != "field:status.hostIP" || listen["DCGM_EXPORTER_LISTEN"] != "$(NODE_IP):9400" {
		t.Errorf("the exporter (host network %v, env %v) does not listen on the node's address at 9400, where the targets point", onGPU.Spec.HostNetwork, listen)
	}
	if onGPU.Spec.AutomountServiceAccountToken == nil || *onGPU.Spec.AutomountServiceAccountToken {
		t.Error("the exporter's pod carries an API token it never uses")
	}
	// The namespace's Pod Security level is what admitted it: the same pod
	// in the Ray workloads' (baseline) namespace is refused.
	if err := tc.CreateNamespace(ctx, "gridweave"); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Kube.CoreV1().Namespaces().Patch(ctx, "gridweave", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dcgm-elsewhere", Namespace: "gridweave"}, Spec: *onGPU.Spec.DeepCopy()}
	elsewhere.Spec.NodeName, elsewhere.Spec.ServiceAccountName = "", ""
	if _, err := tc.Kube.CoreV1().Pods("gridweave").Create(ctx, elsewhere, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
		t.Error("the baseline namespace admits the exporter: its own namespace's level proves nothing")
	}
}

// TestAStoppedReplicaHasTimeToHandOver: the HA Deployment gives a replica
// longer to stop than a stopped leader takes at most (its ledger writes
// under way, master.LedgerDrainTimeout, and its listeners' graceful stop,
// SHUTDOWN_TIMEOUT as the Deployment sets it); killed sooner, a leader
// keeps the Lease until it expires and the next one waits that long.
func TestAStoppedReplicaHasTimeToHandOver(t *testing.T) {
	deployments := 0
	for _, d := range haDocuments(t) {
		if d.Object.GetKind() != "Deployment" {
			continue
		}
		deployments++
		containers, _, _ := unstructured.NestedSlice(d.Object.Object, "spec", "template", "spec", "containers")
		env := map[string]string{}
		for _, c := range containers {
			vars, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			for _, e := range vars {
				if value, ok := e.(map[string]any)["value"].(string); ok {
					env[e.(map[string]any)["name"].(string)] = value
				}
			}
		}
		cfg, err := serverenv.Read(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		grace, found, err := unstructured.NestedInt64(d.Object.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			grace = 30 // the API server's default
		}
		if need := master.LedgerDrainTimeout + cfg.ShutdownTimeout; time.Duration(grace)*time.Second <= need {
			t.Errorf("%s: terminationGracePeriodSeconds is %d; a leader may take %s to stop", d.Object.GetName(), grace, need)
		}
	}
	if deployments != 1 {
		t.Fatalf("%d Deployments in the HA files, want 1", deployments)
	}
}
