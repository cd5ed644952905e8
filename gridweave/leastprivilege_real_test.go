package gridweave_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/deploy"
	"gridweave.dev/gridweave"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/manifest/validation"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl"
)

// The shipped RBAC (deploy/kubernetes/rbac.yaml) is least privilege, and
// proven so on the real API server: the server, run with a token of the
// ServiceAccount those roles bind (TokenRequest API), goes through the
// steps of its life (GPU nodes join and get a worker, workers and their
// logs listed, a later Node's pod CIDR routed by the informer, the
// clusters API, a disconnect); every request it makes is recorded. Every
// granted rule is used, and, one rule at a time, a server whose roles
// lack that rule fails the step that first needed it (or, for a call made
// only at times, a later step that made it too), with a 403 from the API
// server.

// apiCall is one (verb, resource) the server asked of the API server.
type apiCall struct{ verb, resource string }

func (c apiCall) String() string { return c.verb + " " + c.resource }

// callRecorder wraps the server's transport and records its API calls and
// the ones the API server refused (403), by the step they were sent in.
// The server keeps calling while the test reads: read it through
// snapshot.
type callRecorder struct {
	mu      sync.Mutex
	step    string
	first   map[apiCall]string          // the step that first made the call
	made    map[apiCall]map[string]bool // every step that made it
	refused map[apiCall]map[string]bool // every step in which the API server refused it
}

// callLog is a copy of what a callRecorder recorded.
type callLog struct {
	first         map[apiCall]string
	made, refused map[apiCall]map[string]bool
}

func (r *callRecorder) snapshot() callLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := callLog{first: maps.Clone(r.first), made: map[apiCall]map[string]bool{}, refused: map[apiCall]map[string]bool{}}
	for c, steps := range r.made {
		l.made[c] = maps.Clone(steps)
	}
	for c, steps := range r.refused {
		l.refused[c] = maps.Clone(steps)
	}
	return l
}

func (r *callRecorder) setStep(s string) { r.mu.Lock(); r.step = s; r.mu.Unlock() }

// madeCall reports whether the server has made the call, answered or
// refused.
func (r *callRecorder) madeCall(c apiCall) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, made := r.first[c]
	return made
}

func (r *callRecorder) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		call, ok := callOf(req)
		// The step as the call is sent: once answered, the test may
		// already have moved on to the next one.
		r.mu.Lock()
		step := r.step
		r.mu.Unlock()
		resp, err := next.RoundTrip(req)
		if ok {
			r.mu.Lock()
			if _, seen := r.first[call]; !seen {
				r.first[call] = step
				r.made[call] = map[string]bool{}
			}
			r.made[call][step] = true
			if err == nil && resp.StatusCode == http.StatusForbidden {
				if r.refused[call] == nil {
					r.refused[call] = map[string]bool{}
				}
				r.refused[call][step] = true
			}
			r.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// callOf maps a request to the RBAC verb and resource it needs.
func callOf(req *http.Request) (apiCall, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return apiCall{}, false // discovery, version
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return apiCall{}, false
	}
	res, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		res += "/" + parts[2]
	}
	verb := map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[req.Method]
	if req.Method == http.MethodGet {
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	if req.Method == http.MethodDelete && !named {
		verb = "deletecollection"
	}
	return apiCall{verb, res}, true
}

// shippedRBAC is rbac.yaml moved to namespace ns, its cluster-scoped
// names made unique to ns.
func shippedRBAC(t *testing.T, ns string) []*unstructured.Unstructured {
	return shippedRBACFile(t, "kubernetes/rbac.yaml", ns)
}

// shippedRBACFile is a shipped RBAC file with the server's ServiceAccount
// moved to namespace ns (objects of kube-system stay there), its names
// made unique to ns; bindings of groups (the machines') are left out:
// they are not the server's, and their names are the cluster's.
func shippedRBACFile(t *testing.T, path, ns string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := fs.ReadFile(deploy.Files, path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := validation.ReadDocuments(path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		o := d.Object
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		if len(subjects) > 0 && subjects[0].(map[string]any)["kind"] != "ServiceAccount" {
			continue
		}
		if o.GetNamespace() != "" && o.GetNamespace() != "kube-system" {
			o.SetNamespace(ns)
		}
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" || o.GetNamespace() == "kube-system" {
			o.SetName(o.GetName() + "-" + ns)
		}
		if o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding" && o.GetNamespace() == "kube-system" {
			_ = unstructured.SetNestedField(o.Object, o.GetName(), "roleRef", "name")
		}
		if len(subjects) > 0 {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
		out = append(out, o)
	}
	return out
}

// grantedCalls lists every (verb, resource) the roles grant.
func grantedCalls(t *testing.T, objs []*unstructured.Unstructured) []apiCall {
	t.Helper()
	var out []apiCall
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					out = append(out, apiCall{verb, res})
				}
			}
		}
	}
	return out
}

// without returns the roles with one verb of one resource taken away.
func without(objs []*unstructured.Unstructured, drop apiCall) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			var kept []any
			for _, r := range rules {
				rule := r.(map[string]any)
				resources, _ := rule["resources"].([]any)
				verbs, _ := rule["verbs"].([]any)
				if slices.Contains(resources, any(drop.resource)) {
					var others []any
					for _, res := range resources {
						if res != drop.resource {
							others = append(others, res)
						}
					}
					if len(others) > 0 {
						rest := maps2(rule)
						rest["resources"] = others
						kept = append(kept, rest)
					}
					var vs []any
					for _, v := range verbs {
						if v != drop.verb {
							vs = append(vs, v)
						}
					}
					if len(vs) > 0 {
						mine := maps2(rule)
						mine["resources"] = []any{drop.resource}
						mine["verbs"] = vs
						kept = append(kept, mine)
					}
					continue
				}
				kept = append(kept, rule)
			}
			_ = unstructured.SetNestedSlice(o.Object, kept, "rules")
		}
		out = append(out, o)
	}
	return out
}

func maps2(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// privilegeRun is the server of one run, with the ServiceAccount's token.
type privilegeRun struct {
	t       *testing.T
	tc      *testcluster.Cluster
	ns      string
	seq     int32
	h       *harness
	calls   *callRecorder
	key     string
	cluster string
	// node and bootstrapToken are the kubelet join mode's machine.
	node           *node
	bootstrapToken string
	nodeLabels     map[string]string
}

func startPrivilegeRun(t *testing.T, tc *testcluster.Cluster, rbac func(ns string) []*unstructured.Unstructured, configure ...func(*gridweave.Config)) *privilegeRun {
	t.Helper()
	ctx := context.Background()
	seq := realSeq.Add(1)
	ns := fmt.Sprintf("gw-rbac-%d", seq)
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	admin, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := rbac(ns)
	if _, err := admin.WithDynamic(tc.Dynamic).Apply(ctx, objs, rayctl.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range objs {
			if o.GetNamespace() == "kube-system" && o.GetKind() == "Role" {
				_ = tc.Kube.RbacV1().Roles("kube-system").Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
			if o.GetNamespace() == "kube-system" && o.GetKind() == "RoleBinding" {
				_ = tc.Kube.RbacV1().RoleBindings("kube-system").Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
			if o.GetKind() == "ClusterRole" {
				_ = tc.Kube.RbacV1().ClusterRoles().Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
			if o.GetKind() == "ClusterRoleBinding" {
				_ = tc.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
		}
	})
	tok, err := tc.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "gridweave-server", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &callRecorder{first: map[apiCall]string{}, made: map[apiCall]map[string]bool{}, refused: map[apiCall]map[string]bool{}, step: "start"}
	cfg := rest.AnonymousClientConfig(tc.Config)
	cfg.BearerToken = tok.Status.Token
	cfg.WrapTransport = rec.RoundTrip
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rayctl.New(kube, ray, &rayctl.Options{Namespace: ns, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.Namespace = ns
	c.InternalToken = internalToken
	c.VPNCIDR, c.MasterVPNIP = netip.MustParsePrefix("198.18.128.0/20"), netip.MustParseAddr("198.18.128.1")
	c.ClusterCIDR = netip.MustParsePrefix("198.18.0.0/17") // the pod CIDRs of privilegeSteps
	for _, f := range configure {
		f(&c)
	}
	pool, _ := joinkeys.NewPool(c.VPNCIDR, c.MasterVPNIP)
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(c.JWTSecret), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, pub, _ := wgkey.GeneratePair()
	s, err := gridweave.New(ctx, c, gridweave.Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: rc, Kube: kube, Dynamic: dyn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h := newHarnessFor(t, s, c)
	h.kr = kr
	// The run's Nodes and RayClusters go with it. A RayCluster left behind
	// recreates its workers, which wait for any node of their pool (the
	// pool label is the same in every run) and would take the next run's
	// GPU; its RayClusters go first, then its Nodes.
	t.Cleanup(func() {
		for _, suffix := range []string{"a", "b"} {
			_ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("rbac-%d-%s", seq, suffix), metav1.DeleteOptions{})
		}
	})
	t.Cleanup(func() {
		bg := context.Background()
		_ = tc.Ray.RayV1().RayClusters(ns).DeleteCollection(bg, metav1.DeleteOptions{}, metav1.ListOptions{})
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			pods, err := tc.Kube.CoreV1().Pods(ns).List(bg, metav1.ListOptions{LabelSelector: "ray.io/node-type=worker"})
			if err == nil && len(pods.Items) == 0 {
				break
			}
		}
	})
	return &privilegeRun{t: t, tc: tc, ns: ns, seq: seq, h: h, calls: rec, cluster: c.ClusterName}
}

// step is one part of the server's life; it returns what went wrong.
type step struct {
	name string
	run  func(r *privilegeRun) error
}

func expect(got reply, status int, what string) error {
	if got.status != status {
		return fmt.Errorf("%s: %d %s", what, got.status, got.raw)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// privilegeSteps are the server's life, in order.
func privilegeSteps() []step {
	// Pod CIDRs: two per run, in 198.18.0.0/17, clear of the VPN pool
	// (198.18.128.0/20) and the test cluster's Service range
	// (198.19.0.0/17), which the ledger refuses to overlap.
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	joinGPU := func(r *privilegeRun, n *node) (string, error) {
		host := n.hostname
		if err := expect(r.h.validate(n, r.key), 200, "validate "+host); err != nil {
			return "", err
		}
		reg := r.h.register(n, h100s(1))
		if err := expect(reg, 200, "register "+host); err != nil {
			return "", err
		}
		group, _ := reg.body["worker_group"].(string)
		return group, expect(r.h.do("POST", "/v1/nodes/report-version", n.token, map[string]any{"hostname": host, "version": "1.4.3"}), 200, "report-version")
	}
	var group string
	return []step{
		{"a GPU node joins and gets a worker group", func(r *privilegeRun) error {
			_, r.key = r.h.mint("org")
			n := newNode(r.t, fmt.Sprintf("rbac-%d-a", r.seq))
			if _, err := r.tc.AddNode(context.Background(), n.hostname, gpu, markOf(r.t, n), fmt.Sprintf("198.18.%d.0/24", 2*(r.seq%60))); err != nil {
				return err
			}
			var err error
			group, err = joinGPU(r, n)
			if err == nil && group == "" {
				err = errors.New("no worker group")
			}
			return err
		}},
		{"its worker is listed and its logs read", func(r *privilegeRun) error {
			deadline := time.Now().Add(60 * time.Second)
			for {
				got := r.h.do("GET", "/v1/kuberay/clusters/"+r.cluster+"/workers", testAdminToken, nil)
				if got.status != 200 {
					return expect(got, 200, "list workers")
				}
				if strings.Contains(string(got.raw), `"phase":"Running"`) {
					break
				}
				if time.Now().After(deadline) {
					var why []string
					pods, _ := r.tc.Kube.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/group=" + group})
					for _, p := range pods.Items {
						for _, c := range p.Status.Conditions {
							why = append(why, fmt.Sprintf("%s %s=%s %s", p.Name, c.Type, c.Status, c.Message))
						}
					}
					return fmt.Errorf("no running worker: %s (%s)", got.raw, strings.Join(why, "; "))
				}
				time.Sleep(250 * time.Millisecond)
			}
			line := fmt.Sprintf("a log line of run %d", r.seq)
			if err := r.tc.AppendPodLog(line); err != nil {
				return err
			}
			logs := r.h.do("GET", "/v1/kuberay/clusters/"+r.cluster+"/worker-groups/"+group+"/logs?tail=5", testAdminToken, nil)
			if logs.status != 200 || !strings.Contains(string(logs.raw), line) {
				return fmt.Errorf("group logs: %d %.300s", logs.status, logs.raw)
			}
			return nil
		}},
		{"a worker group's pods are deleted at once (KubeRay recreates them)", func(r *privilegeRun) error {
			return expect(r.h.do("DELETE", "/v1/kuberay/clusters/"+r.cluster+"/worker-groups/"+group+"/pods", testAdminToken, nil), 200, "delete the group's pods")
		}},
		{"the informer routes the pod CIDR of a Node that comes later", func(r *privilegeRun) error {
			n := newNode(r.t, fmt.Sprintf("rbac-%d-b", r.seq))
			host := n.hostname
			if _, err := joinGPU(r, n); err != nil {
				return err
			}
			cidr := fmt.Sprintf("198.18.%d.0/24", 2*(r.seq%60)+1)
			if _, err := r.tc.AddNode(context.Background(), host, gpu, markOf(r.t, n), cidr); err != nil {
				return err
			}
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if got := r.h.do("GET", "/v1/nodes/"+host, testAdminToken, nil); strings.Contains(string(got.raw), cidr) {
					return nil
				}
			}
			return errors.New("the pod CIDR of a later Node never reached the ledger")
		}},
		{"the clusters API creates, lists, reads and deletes a RayCluster", func(r *privilegeRun) error {
			if err := expect(r.h.do("POST", "/v1/kuberay/clusters", testAdminToken, map[string]any{"name": "extra", "head": map[string]any{"cpu": "1", "memory": "2Gi"},
				"worker_groups": []any{map[string]any{"name": "cpu", "replicas": 1, "cpu": "1", "memory": "1Gi"}}}), 201, "create cluster"); err != nil {
				return err
			}
			// Removing a group drains it first: scaled to 0, its pods
			// watched until they are gone.
			if err := expect(r.h.do("DELETE", "/v1/kuberay/clusters/extra/worker-groups/cpu", testAdminToken, nil), 200, "remove a worker group"); err != nil {
				return err
			}
			if err := expect(r.h.do("GET", "/v1/kuberay/clusters", testAdminToken, nil), 200, "list clusters"); err != nil {
				return err
			}
			if err := expect(r.h.do("GET", "/v1/kuberay/clusters/extra", testAdminToken, nil), 200, "get cluster"); err != nil {
				return err
			}
			got := r.h.do("DELETE", "/v1/kuberay/clusters/extra", testAdminToken, nil)
			if got.status != 200 && got.status != 204 {
				return expect(got, 204, "delete cluster")
			}
			return nil
		}},
		{"the CRD proxy keeps the gateway's jobs and endpoints", func(r *privilegeRun) error {
			for _, kind := range []struct{ path, name string }{{"jobs", "job-1"}, {"endpoints", "ep-1"}} {
				obj := map[string]any{"metadata": map[string]any{"name": kind.name}, "spec": map[string]any{"owner": "alice", "cluster": "rl", "entrypoint": "python x.py"}}
				if kind.path == "endpoints" {
					obj["spec"] = map[string]any{"name": "chat", "cluster": "serve", "model": "m", "hardware": map[string]any{"gpuType": "NVIDIA-L4", "gpus": 1}, "replicas": 1}
				}
				base := "/v1/crd/" + kind.path
				steps := []struct {
					method, path string
					body         any
					want         int
				}{
					{"POST", base, obj, 201},
					{"GET", base, nil, 200},
					{"GET", base + "/" + kind.name, nil, 200},
					{"PATCH", base + "/" + kind.name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "rl"}}}, 200},
					{"PATCH", base + "/" + kind.name + "/status", map[string]any{"status": map[string]any{"phase": "Pending"}}, 200},
					{"DELETE", base + "/" + kind.name, nil, 200},
				}
				for _, st := range steps {
					if err := expect(r.h.do(st.method, st.path, internalToken, st.body), st.want, st.method+" "+st.path); err != nil {
						return err
					}
				}
			}
			return nil
		}},
		{"disconnects remove the nodes, their workers and their Nodes", func(r *privilegeRun) error {
			// The second node's worker runs before it goes: as the last
			// node of its group, its pod is the server's to delete.
			ctx := context.Background()
			selector := metav1.ListOptions{LabelSelector: "ray.io/cluster=" + r.cluster + ",ray.io/group=" + group}
			running := func(host string) bool {
				pods, err := r.tc.Kube.CoreV1().Pods(r.ns).List(ctx, selector)
				if err != nil {
					return false
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName == host && p.Status.Phase == corev1.PodRunning {
						return true
					}
				}
				return false
			}
			b := fmt.Sprintf("rbac-%d-b", r.seq)
			for deadline := time.Now().Add(60 * time.Second); !running(b); time.Sleep(250 * time.Millisecond) {
				if time.Now().After(deadline) {
					return errors.New("no worker runs on the second node")
				}
			}
			for _, host := range []string{fmt.Sprintf("rbac-%d-a", r.seq), b} {
				if err := expect(r.h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": host}), 200, "disconnect "+host); err != nil {
					return err
				}
			}
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
				pods, err := r.tc.Kube.CoreV1().Pods(r.ns).List(ctx, selector)
				if err == nil && len(pods.Items) == 0 {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d worker pods of the disconnected nodes remain", len(pods.Items))
				}
			}
		}},
	}
}

// runSteps runs the steps in order until one fails; it returns the name
// of the failing step and its error.
// stepIndex is the place of the step named name in privilegeSteps.
func stepIndex(name string) int {
	for i, s := range privilegeSteps() {
		if s.name == name {
			return i
		}
	}
	return -1
}

func (r *privilegeRun) runSteps() (string, error) {
	for _, s := range privilegeSteps() {
		r.calls.setStep(s.name)
		if err := s.run(r); err != nil {
			return s.name, err
		}
	}
	return "", nil
}

func TestLeastPrivilege(t *testing.T) {
	// A control plane of its own: its runs count on nothing but their own
	// nodes and pods (on the package's shared one, the GPU nodes and groups
	// other tests leave behind kept later runs' workers Pending).
	tc := testcluster.Start(t, nil)
	full := func(ns string) []*unstructured.Unstructured { return shippedRBAC(t, ns) }
	r := startPrivilegeRun(t, tc, full)
	if failed, err := r.runSteps(); err != nil {
		t.Fatalf("with the shipped RBAC, step %q failed: %v", failed, err)
	}
	granted := grantedCalls(t, shippedRBAC(t, "x"))
	full0 := r.calls.snapshot()
	var unused []string
	firstStep := map[apiCall]string{}
	for _, g := range granted {
		step, used := full0.first[g]
		if !used && g != (apiCall{"list", "nodes"}) { // see the informer below
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

	// One rule at a time away: the step that first needed it fails, and
	// the API server refused that call with 403. The Node informer's list
	// and watch are the exception: without one the informer falls back on
	// the other (relists, or the watch-list of Kubernetes 1.34+), later but
	// still correct, so no step fails; that it asks is checked above.
	informer := map[apiCall]bool{{"list", "nodes"}: true, {"watch", "nodes"}: true}
	if _, watched := full0.first[apiCall{"watch", "nodes"}]; !watched {
		t.Error("the server never watched Nodes")
	}
	for _, g := range granted {
		want, ok := firstStep[g]
		if !ok || informer[g] {
			continue
		}
		t.Run("without "+g.String(), func(t *testing.T) {
			r := startPrivilegeRun(t, tc, func(ns string) []*unstructured.Unstructured { return without(shippedRBAC(t, ns), g) })
			failed, err := r.runSteps()
			got := r.calls.snapshot()
			switch {
			case err == nil:
				t.Errorf("every step passed without %s", g)
			case failed != want && !full0.made[g][failed] && !got.refused[g][failed] && stepIndex(failed) < stepIndex(want):
				// Some calls are made only at times: a Node read
				// straight from the API server when the watch has not
				// seen it, the Service ranges a register reads only
				// once the watch has listed every Node (the watch reads
				// them otherwise). So a step before the one that first
				// made the call in the full run may fail for want of
				// it, if it was refused the call; a step before it that
				// neither made the call then nor was refused it now
				// failed for something else.
				t.Errorf("without %s, step %q failed (%v); want step %q, a later one or a step that made the call (%v) or was refused it (%v)", g, failed, err, want, full0.made[g], got.refused[g])
			case len(got.refused[g]) == 0:
				t.Errorf("without %s, step %q failed (%v) but the API server refused no %s", g, failed, err, g)
			case strings.Contains(err.Error(), "kubernetes_denied") || strings.Contains(err.Error(), "forbidden"):
				t.Logf("without %s: %q fails: %.160s", g, failed, err.Error())
			default:
				t.Logf("without %s: %q fails (%v); the API server refused the call, the server's answer did not say so", g, failed, err)
			}
		})
	}
}
