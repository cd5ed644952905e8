package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"gridweave.dev/internal/testcluster"
)

// TestInstallCRDs: with --install-crds the server installs GridweaveJob
// and GridweaveEndpoint on an API server that never had them, and serves
// them.
func TestInstallCRDs(t *testing.T) {
	tc := testcluster.Start(t, &testcluster.Options{WithoutGridweaveCRDs: true})
	ctx := context.Background()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	names := []string{"gridweavejobs.gridweave.dev", "gridweaveendpoints.gridweave.dev"}
	for _, n := range names {
		if _, err := tc.Dynamic.Resource(crds).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s before the server started: want NotFound, got %v", n, err)
		}
	}
	if err := tc.CreateNamespace(ctx, "gridweave"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBERAY_DB": filepath.Join(t.TempDir(), "kuberay.db"), "KUBECONFIG": tc.KubeconfigPath, "WG_INTERFACE": "none",
		"ADMIN_TOKEN": "install-crds-admin-token-0123456789", "JWT_SECRET": strings.Repeat("j", 40), "INTERNAL_TOKEN": "install-crds-internal-token-0123456789"}
	s := start(t, env, "--install-crds")
	for _, n := range names {
		if _, err := tc.Dynamic.Resource(crds).Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("%s after --install-crds: %v", n, err)
		}
	}
	status, body := post(t, s.url+"/v1/crd/jobs", env["INTERNAL_TOKEN"], map[string]any{"metadata": map[string]any{"name": "j1"},
		"spec": map[string]any{"owner": "alice", "cluster": "rl", "entrypoint": "python x.py"}})
	if status != 201 {
		t.Errorf("a GridweaveJob through the server: %d %v", status, body)
	}
	// Against a real cluster the Ray dashboard defaults to the master's.
	if !strings.Contains(s.stderr.String(), `"url":"http://10.100.0.1:8265"`) {
		t.Errorf("the start-up log does not give the default RAY_DASHBOARD_URL:\n%s", s.stderr.String())
	}
}
