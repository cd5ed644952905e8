package validation_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/manifest/validation"
)

// TestRemovedAndDeprecatedAPIVersions: a version the target release no
// longer serves is an error naming the release that removed it and the
// replacement; a deprecated one is a warning with its removal release.
func TestRemovedAndDeprecatedAPIVersions(t *testing.T) {
	deployment := "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: old}\nspec: {template: {spec: {containers: [{name: c, image: nginx}]}}}\n"
	cronJob := "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: cj}\nspec: {schedule: '* * * * *', jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}}\n"
	crd := "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\nspec: {}\n"
	rayAlpha := strings.Replace(rayClusterDoc("alpha"), "ray.io/v1", "ray.io/v1alpha1", 1)
	for _, c := range []struct {
		doc, target, severity, message, fix string
	}{
		{deployment, "1.35", "error", "apps/v1beta1 Deployment was removed in Kubernetes 1.16; a 1.35 API server refuses it", "use apiVersion apps/v1"},
		{cronJob, "1.35", "error", "batch/v1beta1 CronJob was removed in Kubernetes 1.25; a 1.35 API server refuses it", "use apiVersion batch/v1"},
		{cronJob, "1.24", "warning", "batch/v1beta1 CronJob is deprecated since Kubernetes 1.21 and removed in 1.25", "use apiVersion batch/v1"},
		{cronJob, "1.20", "", "", ""},
		{crd, "1.35", "error", "apiextensions.k8s.io/v1beta1 CustomResourceDefinition was removed in Kubernetes 1.22", "use apiVersion apiextensions.k8s.io/v1"},
		{rayAlpha, "1.35", "warning", "ray.io/v1alpha1 is KubeRay's API from before v1.0", "use apiVersion ray.io/v1"},
		{strings.Replace(cronJob, "batch/v1beta1", "resource.k8s.io/v1beta2", 1), "1.35", "", "", ""},
		{"apiVersion: resource.k8s.io/v1beta2\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {}\n", "1.35", "warning", "resource.k8s.io/v1beta2 is a pre-release API version", "check that the cluster serves it (kubectl api-versions), or use the GA version"},
	} {
		target, err := validation.ParseKubernetesVersion(c.target)
		if err != nil {
			t.Fatal(err)
		}
		docs := lintDocs(t, c.doc)
		var found []validation.Finding
		for _, f := range validation.Lint(validation.NewValidator(validation.TargetKubernetes(target)), docs) {
			if strings.HasSuffix(f.ID, "-api") {
				found = append(found, f)
			}
		}
		if c.severity == "" {
			if len(found) > 0 {
				t.Errorf("%s at %s: %v", docs[0].Object.GetAPIVersion(), c.target, found)
			}
			continue
		}
		if len(found) != 1 || string(found[0].Severity) != c.severity || found[0].Path != "apiVersion" ||
			!strings.HasPrefix(found[0].Message, c.message) || found[0].Fix != c.fix {
			t.Errorf("%s at %s: want one %s %q (fix %q), got %v", docs[0].Object.GetAPIVersion(), c.target, c.severity, c.message, c.fix, found)
		}
	}
}

func TestParseKubernetesVersion(t *testing.T) {
	for in, want := range map[string]string{"1.35": "1.35", "v1.30": "1.30", "1.29.4": "1.29", "v1.30.4-gke.1348000": "1.30", "v1.29.2+k3s1": "1.29", "1.30.0-rc.1": "1.30"} {
		got, err := validation.ParseKubernetesVersion(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "1", "banana", "2.1", "1.x", "1.2.3.4", "1.-1", "1.+5", "1..2"} {
		if _, err := validation.ParseKubernetesVersion(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestEveryBuiltinKindIsValidated: every object kind of client-go's
// scheme is decoded strictly — a misspelled field is an error naming it —
// not waved through as a kind without a schema.
func TestEveryBuiltinKindIsValidated(t *testing.T) {
	v := validation.NewValidator()
	checked := 0
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || !hasObjectMeta(gvk) {
			continue // lists, options, watch events, discovery documents
		}
		switch gvk.Kind {
		case "Scale", "Eviction", "TokenRequest", "PodStatusResult", "RangeAllocation":
			continue // subresource bodies and the server's own: not objects a user applies
		}
		doc := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\nmisspeltField: 1\n", gvk.GroupVersion(), gvk.Kind)
		findings := validation.Lint(v, lintDocs(t, doc))
		var unknownField, removed bool
		for _, f := range findings {
			switch {
			case f.ID == "unknown-kind":
				t.Errorf("%s: %s", gvk, f)
			case f.ID == "unknown-field" && f.Path == "misspeltField":
				unknownField = true
			case f.ID == "removed-api":
				removed = true
			}
		}
		if !unknownField && !removed {
			t.Errorf("%s: the misspelt field was not found: %v", gvk, findings)
		}
		checked++
	}
	if checked < 150 {
		t.Fatalf("only %d kinds in client-go's scheme", checked)
	}
}

// hasObjectMeta: the kind is an object (not an option or event type).
func hasObjectMeta(gvk schema.GroupVersionKind) bool {
	t, ok := clientgoscheme.Scheme.AllKnownTypes()[gvk]
	if !ok {
		return false
	}
	_, ok = t.FieldByName("ObjectMeta")
	return ok
}

// TestBuiltinKindsMatchTheAPIServer holds the built-in kinds to a real
// API server's discovery: every kind and version it serves (but custom
// resources and subresources) is one lint decodes strictly, with the same
// scope (namespaced or not).
func TestBuiltinKindsMatchTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane")
	}
	tc := testcluster.Shared(t)
	dc, err := discovery.NewDiscoveryClientForConfig(tc.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	custom := map[string]bool{"ray.io": true, "gateway.networking.k8s.io": true, "gridweave.dev": true, "apiregistration.k8s.io": true}
	served := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		if custom[gv.Group] || strings.HasSuffix(gv.Group, ".x-k8s.io") {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			gvk := gv.WithKind(r.Kind)
			served++
			findings := validation.Lint(validation.NewValidator(), lintDocs(t, fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\n", gv, r.Kind)))
			for _, f := range findings {
				if f.ID == "unknown-kind" || f.ID == "removed-api" {
					t.Errorf("%s, served by the API server: %s", gvk, f)
				}
			}
			if got := validation.Namespaced(gvk); got != r.Namespaced {
				t.Errorf("%s: lint takes it as namespaced=%v, the API server says %v", gvk, got, r.Namespaced)
			}
		}
	}
	if served < 50 {
		t.Fatalf("only %d kinds served", served)
	}
	// The other way: every object kind lint takes as served (no removed,
	// pre-release or unknown-kind finding) is served by the API server.
	servedKinds := map[schema.GroupVersionKind]bool{}
	for _, list := range lists {
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				servedKinds[gv.WithKind(r.Kind)] = true
			}
		}
	}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || !hasObjectMeta(gvk) || servedKinds[gvk] {
			continue
		}
		findings := validation.Lint(validation.NewValidator(), lintDocs(t, fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\n", gvk.GroupVersion(), gvk.Kind)))
		said := false
		for _, f := range findings {
			switch f.ID {
			case "removed-api", "prerelease-api", "deprecated-api", "unknown-kind", "type":
				said = true
			}
		}
		if !said {
			t.Errorf("%s: the API server does not serve it, and lint says nothing about that: %v", gvk, findings)
		}
	}
	t.Logf("%d built-in kinds and versions served, each decoded strictly with the server's scope", served)
}
