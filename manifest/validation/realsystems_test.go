package validation_test

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest/validation"
	"gridweave.dev/rayctl"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" && os.Getenv("GOGC") == "" {
		// The tests that hold Validate to its oracles (kube-openapi, the
		// API server's strategies, CEL) allocate much and keep little: at
		// the default pace a third of their CPU time went to the
		// collector. At 400 the package's tests take 153 CPU-seconds
		// instead of 209, with a peak of 3.2 GB instead of 1.75.
		// Benchmarks keep the pace users run with.
		debug.SetGCPercent(400)
	}
	os.Exit(testcluster.RunMain(m))
}

// admissionIDs are the findings that say the API server refuses the
// object itself. For built-in workloads the pod template is part of the
// object, so its checks are admission checks too; for ray.io kinds they
// surface when the operator creates the pods.
var admissionIDs = map[string]bool{"parse": true, "decode": true, "schema": true, "unknown-field": true, "metadata": true, "type": true}

func admissionError(d validation.Document, f validation.Finding) bool {
	if f.Severity != validation.SeverityError {
		return false
	}
	if d.Object != nil && d.Object.GroupVersionKind().Group != "ray.io" {
		return true
	}
	return admissionIDs[f.ID]
}

// refusal reports whether a Warning event says the KubeRay operator will
// not reconcile an object, or that the API server refused what it built
// from it (a pod, a Service, the submitter Job) as invalid — not a
// transient failure such as a create racing its own cache.
func refusal(e corev1.Event) bool {
	if e.Type != corev1.EventTypeWarning {
		return false
	}
	return invalidReason.MatchString(e.Reason) ||
		strings.HasPrefix(e.Reason, "FailedToCreate") && strings.Contains(e.Message, " is invalid")
}

var invalidReason = regexp.MustCompile(`^Invalid\w*(Spec|Metadata)$`)

// TestLintAgreesWithTheRealSystems lints YAML written the way users write
// it (testdata/users: one mistake per document, or none) and holds every
// verdict to the real systems: the API server (a dry-run create with
// strict field validation) refuses exactly the documents lint reports an
// admission error for, naming the fields lint names; of the ray.io
// objects it admits, the KubeRay operator refuses (an Invalid*Spec event,
// or the server refusing a pod, Service or Job it builds) exactly those
// lint reports another error for.
func TestLintAgreesWithTheRealSystems(t *testing.T) {
	files, _ := filepath.Glob("testdata/users/*.yaml")
	got := agreeWithRealSystems(t, "users", files)
	if got.refused < 10 || got.admitted < 10 || got.operatorRefused < 3 {
		t.Fatalf("the corpus exercises too little: %+v", got)
	}
}

// TestLintAgreesOnKubeRaySamples does the same with every sample of the
// KubeRay release (config/samples of the operator module): YAML users copy
// first. Kinds whose CRDs are not installed (Gateway, Volcano queues) are
// skipped.
func TestLintAgreesOnKubeRaySamples(t *testing.T) {
	dir, err := moduleDir("github.com/ray-project/kuberay/ray-operator")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(filepath.Join(dir, "config", "samples"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := agreeWithRealSystems(t, "samples", files)
	if got.admitted < 100 {
		t.Fatalf("too few samples reached the API server: %+v", got)
	}
}

// moduleDir is where the Go module cache holds a dependency's source.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// runs counts calls of agreeWithRealSystems, which share one cluster.
var runs atomic.Int32

type agreement struct{ refused, admitted, skipped, live, operatorRefused int }

// agreeWithRealSystems holds lint's verdict on every document of files to
// the API server and the operator (see TestLintAgreesWithTheRealSystems).
func agreeWithRealSystems(t *testing.T, prefix string, files []string) (got agreement) {
	t.Helper()
	prefix = fmt.Sprintf("%s%d", prefix, runs.Add(1)) // fresh names when run again (-count)
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A node the pods can run on, so RayJobs get as far as their
	// submitter.
	big := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("16Ti"),
		corev1.ResourcePods: resource.MustParse("1000"), "nvidia.com/gpu": resource.MustParse("64"),
	}
	if _, err := tc.AddNode(ctx, prefix+"-node", big, nil, ""); err != nil {
		t.Fatal(err)
	}
	// The Gateway API CRDs lint embeds, installed as a cluster would have
	// them.
	crdFiles, _ := filepath.Glob("crds/gateway.networking.k8s.io_*.yaml")
	var crds []*unstructured.Unstructured
	for _, file := range crdFiles {
		docs, err := validation.LoadDocuments(file)
		if err != nil || len(docs) != 1 || docs[0].Err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		crds = append(crds, docs[0].Object)
	}
	rc, err := rayctl.New(tc.Kube, tc.Ray, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.WithDynamic(tc.Dynamic).Apply(ctx, crds, rayctl.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(tc.Kube.Discovery()))
	v := validation.NewValidator()

	type created struct {
		name, namespace, kind string
		lintErrors            []validation.Finding
	}
	var live []created
	seq := 0
	for _, file := range files {
		docs, err := validation.LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Err != nil {
				t.Fatalf("%s: %v", d.Source, d.Err)
			}
			findings := validation.Lint(v, []validation.Document{d})
			var ours, others []validation.Finding
			for _, f := range findings {
				if admissionError(d, f) {
					ours = append(ours, f)
				} else if f.Severity == validation.SeverityError && !silentRules[f.ID] {
					others = append(others, f)
				}
			}
			obj := d.Object.DeepCopy()
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			removedAPI := slices.ContainsFunc(findings, func(f validation.Finding) bool { return f.ID == "removed-api" })
			if meta.IsNoMatchError(err) {
				if removedAPI {
					got.refused++ // the server does not serve the version, as lint says
				} else {
					got.skipped++ // a kind this cluster does not serve
				}
				continue
			} else if err != nil {
				t.Fatalf("%s: %v", d.Source, err)
			}
			if removedAPI {
				t.Errorf("%s %s: lint says %s was removed; the API server serves it", d.Source, obj.GetName(), gvk.GroupVersion())
			}
			seq++
			ns := fmt.Sprintf("%s-%d", prefix, seq)
			if err := tc.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			var client dynamic.ResourceInterface = tc.Dynamic.Resource(mapping.Resource).Namespace(ns)
			if mapping.Scope.Name() == meta.RESTScopeNameRoot {
				client = tc.Dynamic.Resource(mapping.Resource)
			}
			_, serverErr := client.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			if serverErr != nil && !apierrors.IsInvalid(serverErr) && !apierrors.IsBadRequest(serverErr) {
				t.Fatalf("%s: %v", d.Source, serverErr)
			}
			switch {
			case serverErr != nil && len(ours) == 0:
				t.Errorf("%s %s: the API server refuses it and lint finds no admission error:\n  server: %v\n  lint: %v", d.Source, obj.GetName(), serverErr, findings)
			case serverErr == nil && len(ours) > 0:
				t.Errorf("%s %s: lint reports admission errors the API server does not make:\n  lint: %v", d.Source, obj.GetName(), ours)
			case serverErr != nil:
				got.refused++
				for _, field := range serverFields(serverErr) {
					if !namesField(ours, field) {
						t.Errorf("%s %s: the API server names %s; lint names only %v", d.Source, obj.GetName(), field, paths(ours))
					}
				}
				continue
			}
			got.admitted++
			if gvk.Group != "ray.io" {
				continue
			}
			if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", d.Source, err)
			}
			live = append(live, created{name: obj.GetName(), namespace: ns, kind: gvk.Kind, lintErrors: others})
		}
	}
	got.live = len(live)
	t.Logf("the API server refused %d documents and admitted %d (%d of kinds it does not serve skipped); %d ray.io objects created for the operator", got.refused, got.admitted, got.skipped, len(live))

	// Wait until every refusal lint predicts has come and the operator has
	// acted on every other object (it records an event on each: created a
	// Service, a pod, a cluster) — objects no controller takes (a
	// RayCronJob behind its feature gate, a RayJob waiting for a cluster it
	// selects) are given 30 seconds — or until two minutes have passed;
	// then compare. Under load the operator's client is rate limited, so
	// its events can take tens of seconds.
	refusals := map[string][]string{}
	start := time.Now()
	for {
		refused, acted := true, true
		for _, c := range live {
			events, err := tc.Kube.CoreV1().Events(c.namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			refusals[c.namespace] = nil
			seen := false
			for _, e := range events.Items {
				seen = seen || e.InvolvedObject.Kind == c.kind
				if refusal(e) {
					refusals[c.namespace] = append(refusals[c.namespace], e.Reason+": "+e.Message)
				}
			}
			refused = refused && (len(c.lintErrors) == 0 || len(refusals[c.namespace]) > 0)
			acted = acted && seen
		}
		waited := time.Since(start)
		if refused && (acted || waited > 30*time.Second) || waited > 2*time.Minute {
			break
		}
		time.Sleep(time.Second)
	}
	for _, c := range live {
		events := refusals[c.namespace]
		if len(events) > 0 {
			got.operatorRefused++
		}
		switch {
		case len(events) > 0 && len(c.lintErrors) == 0:
			t.Errorf("%s %s: the operator refuses it (%v) and lint reports no error", c.kind, c.name, events)
		case len(events) == 0 && len(c.lintErrors) > 0:
			t.Errorf("%s %s: lint reports errors the operator does not make: %v\n  events: %s", c.kind, c.name, c.lintErrors, eventSummary(ctx, tc, c.namespace))
		}
	}
	t.Logf("the operator refused %d of the %d objects it was given", got.operatorRefused, len(live))
	return got
}

// eventSummary lists a namespace's events, for failure messages.
func eventSummary(ctx context.Context, tc *testcluster.Cluster, namespace string) string {
	events, err := tc.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range events.Items {
		fmt.Fprintf(&b, "\n    %s %s %s: %s", e.Type, e.InvolvedObject.Kind, e.Reason, e.Message)
	}
	return b.String()
}

// serverFields are the field paths the API server's error names.
func serverFields(err error) []string {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		return nil
	}
	var out []string
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Field != "" && c.Field != "<nil>" {
				out = append(out, c.Field)
			}
		}
	}
	for _, m := range unknownFieldInMessage.FindAllStringSubmatch(status.Status().Message, -1) {
		out = append(out, m[1])
	}
	return out
}

var unknownFieldInMessage = regexp.MustCompile(`unknown field "([^"]+)"`)

// namesField reports whether a finding's path is the field, or contains it
// or is contained in it (the server may name a list where lint names the
// element, or the other way round).
func namesField(fs []validation.Finding, field string) bool {
	for _, f := range fs {
		if f.Path == field || strings.HasPrefix(field, f.Path+".") || strings.HasPrefix(field, f.Path+"[") ||
			strings.HasPrefix(f.Path, field+".") || strings.HasPrefix(f.Path, field+"[") {
			return true
		}
	}
	return false
}

func paths(fs []validation.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}
