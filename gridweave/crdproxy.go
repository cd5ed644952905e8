package gridweave

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"gridweave.dev/gridweave/endpoints"
	"gridweave.dev/rayctl"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/crd/v1alpha1"
)

// The CRD proxy (/v1/crd, internal): GridweaveJobs and GridweaveEndpoints
// in Config.Namespace through the dynamic client, for the job gateway that
// cannot reach Kubernetes. The API server judges every write: its
// validation errors come back as 422 with the field path, a stale
// resourceVersion as 409, an unknown object as 404.

// crdKind is one of our kinds as the proxy serves it.
type crdKind struct {
	kind string
	gvr  schema.GroupVersionResource
}

var (
	jobKind      = crdKind{"GridweaveJob", v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)}
	endpointKind = crdKind{"GridweaveEndpoint", v1alpha1.GroupVersion.WithResource(v1alpha1.EndpointResource)}
)

// crdRoutes serve the CRD proxy: GridweaveJobs and GridweaveEndpoints in
// Config.Namespace; dynamic is nil without a Kubernetes API server.
type crdRoutes struct {
	responder
	dynamic   dynamic.Interface
	namespace string
	mover     *endpoints.Mover
}

func newCRDRoutes(a responder, cfg *Config, ray *rayctl.Client, dyn dynamic.Interface) *crdRoutes {
	p := &crdRoutes{responder: a, dynamic: dyn, namespace: cfg.Namespace}
	if dyn != nil {
		p.mover = &endpoints.Mover{Ray: ray, Namespace: cfg.Namespace, Endpoints: endpoints.NewEndpoints(dyn, cfg.Namespace), Logger: a.log}
	}
	return p
}

func (p *crdRoutes) crdClient(k crdKind) (dynamic.ResourceInterface, error) {
	if p.dynamic == nil {
		return nil, &apiError{code: api.CodeNoKubernetes, message: "the CRD proxy needs a Kubernetes API server (this server runs without one)"}
	}
	return p.dynamic.Resource(k.gvr).Namespace(p.namespace), nil
}

// moveEndpoint follows a patch of an endpoint's spec.hardware (package
// endpoints): the endpoint as stored after the move, or as patched when
// it was on that hardware already.
func (p *crdRoutes) moveEndpoint(ctx context.Context, patched *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ep, err := endpoints.FromUnstructured(patched)
	if err != nil {
		return nil, err
	}
	stored, moved, err := p.mover.Move(ctx, ep)
	if err != nil || !moved {
		return patched, err
	}
	return stored, nil
}

// readObject decodes the request's JSON object, at most MaxBodyBytes.
func (p *crdRoutes) readObject(r *http.Request) (map[string]any, error) {
	raw, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, badField("body", "the body must be a JSON object")
	}
	return obj, nil
}

func (p *crdRoutes) crdCreate(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := p.crdClient(k)
		if err == nil {
			var obj map[string]any
			if obj, err = p.readObject(r); err == nil {
				u := &unstructured.Unstructured{Object: obj}
				if u.GetAPIVersion() == "" {
					u.SetAPIVersion(v1alpha1.GroupVersion.String())
				}
				if u.GetKind() == "" {
					u.SetKind(k.kind)
				}
				switch {
				case u.GetKind() != k.kind || u.GetAPIVersion() != v1alpha1.GroupVersion.String():
					err = badField("kind", "this route takes %s %s, got %s %s", v1alpha1.GroupVersion, k.kind, u.GetAPIVersion(), u.GetKind())
				case u.GetNamespace() != "" && u.GetNamespace() != p.namespace:
					err = badField("metadata.namespace", "objects live in %s, got %q", p.namespace, u.GetNamespace())
				default:
					u.SetNamespace(p.namespace)
					var created *unstructured.Unstructured
					if created, err = ri.Create(r.Context(), u, metav1.CreateOptions{FieldManager: "gridweave", FieldValidation: "Strict"}); err == nil {
						writeJSON(w, http.StatusCreated, created.Object)
						return
					}
				}
			}
		}
		p.writeError(w, r, err)
	}
}

func (p *crdRoutes) crdList(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := p.crdClient(k)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		list, err := ri.List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("label_selector")})
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		owner := r.URL.Query().Get("owner")
		items := []any{}
		for _, it := range list.Items {
			if o, _, _ := unstructured.NestedString(it.Object, "spec", "owner"); owner == "" || o == owner {
				items = append(items, it.Object)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items})
	}
}

func (p *crdRoutes) crdGet(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := objectName(r)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		ri, err := p.crdClient(k)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		obj, err := ri.Get(r.Context(), name, metav1.GetOptions{})
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, obj.Object)
	}
}

// crdPatch applies a JSON merge patch to the object or, with status, to
// its status subresource. A metadata.resourceVersion in the patch makes
// it conditional (409 when stale).
func (p *crdRoutes) crdPatch(k crdKind, status bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := objectName(r)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		ri, err := p.crdClient(k)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		obj, err := p.readObject(r)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		raw, _ := json.Marshal(obj)
		var sub []string
		if status {
			sub = []string{"status"}
		}
		patched, err := ri.Patch(r.Context(), name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: "gridweave", FieldValidation: "Strict"}, sub...)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		spec, _ := obj["spec"].(map[string]any)
		if _, touched := spec["hardware"]; k == endpointKind && !status && touched {
			// A patch of the hardware moves the endpoint before the
			// answer, which then holds its new status.
			if patched, err = p.moveEndpoint(r.Context(), patched); err != nil {
				p.writeError(w, r, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, patched.Object)
	}
}

// objectName returns the route's {name} if it can name an object (a
// DNS-1123 subdomain): another is 400 naming the field, not a request
// the Kubernetes client refuses to send.
func objectName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", badField("name", "%q is not a valid name: %s", name, errs[0])
	}
	return name, nil
}

func (p *crdRoutes) crdDelete(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, err := objectName(r)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		ri, err := p.crdClient(k)
		if err != nil {
			p.writeError(w, r, err)
			return
		}
		if err := ri.Delete(r.Context(), name, metav1.DeleteOptions{}); err != nil {
			p.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
	}
}

// handleEndpointByName finds the endpoint whose spec.name is {name}.
func (p *crdRoutes) handleEndpointByName(w http.ResponseWriter, r *http.Request) {
	ri, err := p.crdClient(endpointKind)
	if err != nil {
		p.writeError(w, r, err)
		return
	}
	list, err := ri.List(r.Context(), metav1.ListOptions{})
	if err != nil {
		p.writeError(w, r, err)
		return
	}
	for _, it := range list.Items {
		if n, _, _ := unstructured.NestedString(it.Object, "spec", "name"); n == r.PathValue("name") {
			writeJSON(w, http.StatusOK, it.Object)
			return
		}
	}
	p.writeError(w, r, &apiError{code: api.CodeNotFound, message: "no GridweaveEndpoint named " + r.PathValue("name")})
}

// routes are the crdRoutes routes.
func (p *crdRoutes) routes() []route {
	gridweaveObject := gridweaveObjectDoc{}
	deleted := api.Deleted{}
	anyObject := anyObjectDoc{}
	return []route{
		{pattern: "POST /v1/crd/jobs", auth: authInternal, on: onPublic | onInternal, handler: p.crdCreate(jobKind),
			doc: operation{id: "createJob", tag: "crd", summary: "Create a GridweaveJob",
				description: "A GridweaveJob object (apiVersion and kind may be left out); the API server validates it against the CRD.",
				request:     gridweaveObject, status: 201, response: gridweaveObject, codes: crdCodes}},
		{pattern: "GET /v1/crd/jobs", auth: authInternal, on: onPublic | onInternal, handler: p.crdList(jobKind),
			doc: operation{id: "listJobs", tag: "crd", summary: "List GridweaveJobs",
				query:  []param{{"label_selector", "A Kubernetes label selector.", stringParam}, {"owner", "Only the jobs of this owner (spec.owner).", stringParam}},
				status: 200, response: gridweaveList{}, codes: crdCodes}},
		{pattern: "GET /v1/crd/jobs/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdGet(jobKind),
			doc: operation{id: "getJob", tag: "crd", summary: "Read a GridweaveJob",
				status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "PATCH /v1/crd/jobs/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdPatch(jobKind, false),
			doc: operation{id: "patchJob", tag: "crd", summary: "Merge-patch a GridweaveJob",
				description: "A JSON merge patch. With metadata.resourceVersion in it the write is conditional: 409 when the object changed since.",
				request:     anyObject, status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "PATCH /v1/crd/jobs/{name}/status", auth: authInternal, on: onPublic | onInternal, handler: p.crdPatch(jobKind, true),
			doc: operation{id: "patchJobStatus", tag: "crd", summary: "Merge-patch a GridweaveJob's status",
				request: anyObject, status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "DELETE /v1/crd/jobs/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdDelete(jobKind),
			doc: operation{id: "deleteJob", tag: "crd", summary: "Delete a GridweaveJob",
				status: 200, response: deleted, codes: crdCodes}},
		{pattern: "POST /v1/crd/endpoints", auth: authInternal, on: onPublic | onInternal, handler: p.crdCreate(endpointKind),
			doc: operation{id: "createEndpoint", tag: "crd", summary: "Create a GridweaveEndpoint",
				request: gridweaveObject, status: 201, response: gridweaveObject, codes: crdCodes}},
		{pattern: "GET /v1/crd/endpoints", auth: authInternal, on: onPublic | onInternal, handler: p.crdList(endpointKind),
			doc: operation{id: "listEndpoints", tag: "crd", summary: "List GridweaveEndpoints",
				query:  []param{{"label_selector", "A Kubernetes label selector.", stringParam}, {"owner", "Only the endpoints of this owner (spec.owner).", stringParam}},
				status: 200, response: gridweaveList{}, codes: crdCodes}},
		{pattern: "GET /v1/crd/endpoints/by-name/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.handleEndpointByName,
			doc: operation{id: "getEndpointByName", tag: "crd", summary: "Read the GridweaveEndpoint whose spec.name is {name}",
				status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "GET /v1/crd/endpoints/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdGet(endpointKind),
			doc: operation{id: "getEndpoint", tag: "crd", summary: "Read a GridweaveEndpoint",
				status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "PATCH /v1/crd/endpoints/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdPatch(endpointKind, false),
			doc: operation{id: "patchEndpoint", tag: "crd", summary: "Merge-patch a GridweaveEndpoint (a new spec.hardware moves its workers)",
				description: "A JSON merge patch. A change of spec.hardware swaps the endpoint's worker group on its RayCluster for one on the new hardware in one update (head and other groups untouched) before answering, and records the new group in the status.",
				request:     anyObject, status: 200, response: gridweaveObject, codes: slices.Concat(crdCodes, rayctlCodes)}},
		{pattern: "PATCH /v1/crd/endpoints/{name}/status", auth: authInternal, on: onPublic | onInternal, handler: p.crdPatch(endpointKind, true),
			doc: operation{id: "patchEndpointStatus", tag: "crd", summary: "Merge-patch a GridweaveEndpoint's status",
				request: anyObject, status: 200, response: gridweaveObject, codes: crdCodes}},
		{pattern: "DELETE /v1/crd/endpoints/{name}", auth: authInternal, on: onPublic | onInternal, handler: p.crdDelete(endpointKind),
			doc: operation{id: "deleteEndpoint", tag: "crd", summary: "Delete a GridweaveEndpoint",
				status: 200, response: deleted, codes: crdCodes}},
	}
}
