package gridweave

import (
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

func (s *Server) crdClient(k crdKind) (dynamic.ResourceInterface, error) {
	if s.dynamic == nil {
		return nil, &apiError{code: api.CodeNoKubernetes, message: "the CRD proxy needs a Kubernetes API server (this server runs without one)"}
	}
	return s.dynamic.Resource(k.gvr).Namespace(s.cfg.Namespace), nil
}

// readObject decodes the request's JSON object, at most MaxBodyBytes.
func (s *Server) readObject(r *http.Request) (map[string]any, error) {
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

func (s *Server) crdCreate(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := s.crdClient(k)
		if err == nil {
			var obj map[string]any
			if obj, err = s.readObject(r); err == nil {
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
				case u.GetNamespace() != "" && u.GetNamespace() != s.cfg.Namespace:
					err = badField("metadata.namespace", "objects live in %s, got %q", s.cfg.Namespace, u.GetNamespace())
				default:
					u.SetNamespace(s.cfg.Namespace)
					var created *unstructured.Unstructured
					if created, err = ri.Create(r.Context(), u, metav1.CreateOptions{FieldManager: "gridweave", FieldValidation: "Strict"}); err == nil {
						writeJSON(w, http.StatusCreated, created.Object)
						return
					}
				}
			}
		}
		s.writeError(w, r, err)
	}
}

func (s *Server) crdList(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := s.crdClient(k)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		list, err := ri.List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("label_selector")})
		if err != nil {
			s.writeError(w, r, err)
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

func (s *Server) crdGet(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := s.crdClient(k)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		obj, err := ri.Get(r.Context(), r.PathValue("name"), metav1.GetOptions{})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, obj.Object)
	}
}

// crdPatch applies a JSON merge patch to the object or, with status, to
// its status subresource. A metadata.resourceVersion in the patch makes
// it conditional (409 when stale).
func (s *Server) crdPatch(k crdKind, status bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := s.crdClient(k)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		obj, err := s.readObject(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		raw, _ := json.Marshal(obj)
		var sub []string
		if status {
			sub = []string{"status"}
		}
		patched, err := ri.Patch(r.Context(), r.PathValue("name"), types.MergePatchType, raw, metav1.PatchOptions{FieldManager: "gridweave", FieldValidation: "Strict"}, sub...)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		spec, _ := obj["spec"].(map[string]any)
		if _, touched := spec["hardware"]; k == endpointKind && !status && touched {
			// A patch of the hardware moves the endpoint before the
			// answer, which then holds its new status.
			if patched, err = s.moveEndpoint(r.Context(), patched); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, patched.Object)
	}
}

func (s *Server) crdDelete(k crdKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ri, err := s.crdClient(k)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := ri.Delete(r.Context(), r.PathValue("name"), metav1.DeleteOptions{}); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"deleted": r.PathValue("name")})
	}
}

// handleEndpointByName finds the endpoint whose spec.name is {name}.
func (s *Server) handleEndpointByName(w http.ResponseWriter, r *http.Request) {
	ri, err := s.crdClient(endpointKind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, err := ri.List(r.Context(), metav1.ListOptions{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, it := range list.Items {
		if n, _, _ := unstructured.NestedString(it.Object, "spec", "name"); n == r.PathValue("name") {
			writeJSON(w, http.StatusOK, it.Object)
			return
		}
	}
	s.writeError(w, r, &apiError{code: api.CodeNotFound, message: "no GridweaveEndpoint named " + r.PathValue("name")})
}
