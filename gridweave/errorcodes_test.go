package gridweave

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/internal/openapitest"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// TestCodeGroupsCoverTheirMappings feeds each source's errors through
// toAPIError: the code each becomes is in the source's group, so a route
// that declares the group documents every code the source can give it.
func TestCodeGroupsCoverTheirMappings(t *testing.T) {
	gr := schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}
	kube := []error{
		apierrors.NewInvalid(schema.GroupKind{Group: "ray.io", Kind: "RayCluster"}, "c", field.ErrorList{field.Required(field.NewPath("spec"), "")}),
		apierrors.NewBadRequest("bad"),
		apierrors.NewNotFound(gr, "c"),
		apierrors.NewAlreadyExists(gr, "c"),
		apierrors.NewConflict(gr, "c", errors.New("changed")),
		apierrors.NewForbidden(gr, "c", errors.New("no")),
		apierrors.NewUnauthorized("no"),
		apierrors.NewTimeoutError("slow", 1),
		apierrors.NewServerTimeout(gr, "get", 1),
		apierrors.NewTooManyRequests("busy", 1),
		context.DeadlineExceeded,
	}
	// The ledger on the Kubernetes API (kubestore) passes its errors
	// through.
	ledger := slices.Concat(kube, []error{
		&joinkeys.FieldError{Field: "hostname", Problem: "is not a hostname"},
		&joinkeys.HostnameTakenError{},
		&mesh.AllowedIPConflictError{},
	})
	for _, l := range ledgerStatuses {
		ledger = append(ledger, fmt.Errorf("wrapped: %w", l.err))
	}
	rayctlErrs := slices.Concat(kube, []error{fmt.Errorf("%w: bad", rayctl.ErrInvalidSpec), fmt.Errorf("%w: g", rayctl.ErrGroupExists),
		fmt.Errorf("%w: c", rayctl.ErrNotFound)})
	// The fleet reaches the ledger, the Nodes and the worker groups.
	fleetErrs := slices.Concat(ledger, rayctlErrs, []error{&fleet.VersionMismatchError{Server: "1.0.0", Worker: "2.0.0", Min: "1.0.0"}})
	for _, kind := range []error{fleet.ErrInvalid, fleet.ErrCredentialRequired, fleet.ErrPublicKeyMismatch, fleet.ErrPodCIDROutsideCluster, fleet.ErrHostnameInCluster} {
		fleetErrs = append(fleetErrs, &fleet.Error{Kind: kind, Field: "f", Message: "m"})
	}
	dash := func(err error) error { return &dashboardFailure{err: err} }
	dashboardErrs := []error{dash(dashboard.ErrNotFound), dash(dashboard.ErrImperativeApps), dash(context.DeadlineExceeded),
		dash(&dashboard.APIError{StatusCode: 500}), dash(errors.New("connection refused"))}
	kubetorchErrs := slices.Concat(kube, []error{&kubetorch.FieldError{Field: "cluster", Problem: "is required"},
		&kubetorch.DashboardError{Err: errors.New("refused")}, &kubetorch.DashboardError{Err: context.DeadlineExceeded},
		kubetorch.ErrNoGPUWorkers, kubetorch.ErrNoDashboard, kubetorch.ErrJobNotFound, kubetorch.ErrNoJobRecord})
	for _, group := range []struct {
		name  string
		codes []string
		errs  []error
	}{
		{"ledgerCodes", ledgerCodes, ledger},
		{"kubernetesCodes", kubernetesCodes, kube},
		{"fleetCodes", fleetCodes, fleetErrs},
		{"rayctlCodes", rayctlCodes, rayctlErrs},
		{"dashboardCodes", dashboardCodes, dashboardErrs},
		{"kubetorchCodes", kubetorchCodes, kubetorchErrs},
	} {
		t.Run(group.name, func(t *testing.T) {
			for _, err := range group.errs {
				if code := toAPIError(err).code; !slices.Contains(group.codes, code) {
					t.Errorf("%v becomes %q, which %s lacks", err, code, group.name)
				}
			}
		})
	}
}

// TestEachRouteDocumentsItsOwnCodes: the document lists a route's codes,
// not every code of a status: a node read may answer node_not_found but
// not worker_group_exists, a cluster's creation the reverse.
func TestEachRouteDocumentsItsOwnCodes(t *testing.T) {
	s, _ := newDocsTestServer(t)
	raw, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	d := openapitest.MustParse(t, raw)
	answer := func(code string) []byte { return []byte(`{"error":{"code":"` + code + `","message":"x"}}`) }
	for _, c := range []struct {
		method, path string
		status       int
		code         string
		listed       bool
	}{
		{"GET", "/v1/nodes/box", 404, api.CodeNodeNotFound, true},
		{"GET", "/v1/nodes/box", 409, api.CodeWorkerGroupExists, false},
		{"POST", "/v1/kuberay/clusters", 409, api.CodeWorkerGroupExists, true},
		{"POST", "/v1/kuberay/clusters", 409, api.CodeHostnameTaken, false},
		{"POST", "/v1/nodes/validate", 409, api.CodeHostnameTaken, true},
		{"POST", "/v1/nodes/validate", 503, api.CodeNoRayDashboard, false},
		{"GET", "/v1/ray/serve/statuses", 503, api.CodeNoRayDashboard, true},
		{"GET", "/v1/nodes/worker-image", 404, api.CodeThroughTheTunnel, true},
		{"GET", "/v1/nodes/agent/linux/amd64", 404, api.CodeThroughTheTunnel, false},
	} {
		err := d.Check(c.method, c.path, c.status, "application/json", answer(c.code))
		if (err == nil) != c.listed {
			t.Errorf("%s %s answering %d %s: listed %t, want %t (%v)", c.method, c.path, c.status, c.code, err == nil, c.listed, err)
		}
	}
	for _, rt := range s.routeTable() {
		_, path, _ := strings.Cut(rt.pattern, " ")
		for _, code := range routeCodes(rt, rt.doc, path) {
			if _, ok := api.ErrorStatus[code]; !ok {
				t.Errorf("%s declares %q, which is no error code of the API", rt.pattern, code)
			}
		}
	}
}
