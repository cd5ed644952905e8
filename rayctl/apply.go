package rayctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// Force takes ownership of fields another manager set (kubectl's
	// --force-conflicts); without it such a conflict is an error.
	Force bool
	// DryRun asks the server to validate and default without persisting.
	DryRun bool
	// Wait waits, after applying everything, until each RayCluster,
	// RayJob (running), RayService and Deployment in the set is ready.
	Wait bool
	// WaitOptions bound the wait and report progress.
	WaitOptions WaitOptions
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// applier holds what Apply needs beyond the typed clientsets.
type applier struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

// WithDynamic returns a copy of the Client that can also Apply and delete
// objects of any kind, through dyn and a REST mapper over the Kubernetes
// clientset's discovery.
func (c *Client) WithDynamic(dyn dynamic.Interface) *Client {
	cp := *c
	cp.apply = &applier{dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))}
	return &cp
}

// resource maps obj to its REST resource, refreshing discovery once when
// the kind is unknown (e.g. a CRD applied a moment ago).
func (a *applier) resource(obj *unstructured.Unstructured, defaultNS string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, nil, invalid("apiVersion/kind", "object %q has no apiVersion or kind", obj.GetName())
	}
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameRoot {
		return a.dynamic.Resource(mapping.Resource), mapping, nil
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = defaultNS
		obj.SetNamespace(ns)
	}
	return a.dynamic.Resource(mapping.Resource).Namespace(ns), mapping, nil
}

// Apply server-side-applies objects in order with field manager
// "gridweave" and returns them as stored. A CRD in the set is waited for
// until Established before the next object, so a set may carry CRDs and
// their custom resources together. With Wait it then waits for readiness.
func (c *Client) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]*unstructured.Unstructured, error) {
	if c.apply == nil {
		return nil, errors.New("rayctl: Apply needs a dynamic client (Client.WithDynamic)")
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for i, obj := range objs {
		obj = obj.DeepCopy()
		if obj.GetName() == "" {
			return out, invalid(fmt.Sprintf("objects[%d].metadata.name", i), "is required")
		}
		ri, _, err := c.apply.resource(obj, c.namespace)
		if err != nil {
			return out, err
		}
		applyOpts := metav1.ApplyOptions{FieldManager: FieldManager, Force: opts.Force}
		if opts.DryRun {
			applyOpts.DryRun = []string{metav1.DryRunAll}
		}
		stored, err := ri.Apply(ctx, obj.GetName(), obj, applyOpts)
		if err != nil {
			return out, fmt.Errorf("apply %s %s: %w", obj.GetKind(), describeObj(obj), err)
		}
		out = append(out, stored)
		c.log.InfoContext(ctx, "applied", "kind", obj.GetKind(), "object", describeObj(obj))
		if obj.GroupVersionKind() == crdGVK && !opts.DryRun {
			if err := c.waitEstablished(ctx, ri, obj.GetName()); err != nil {
				return out, err
			}
			c.apply.mapper.Reset()
		}
	}
	if opts.Wait && !opts.DryRun {
		for _, obj := range out {
			if err := c.WaitReady(ctx, obj, opts.WaitOptions); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func (c *Client) waitEstablished(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// WaitReady waits until obj is ready if it is a kind whose readiness this
// package knows (RayCluster, RayJob running, RayService, Deployment); for
// other kinds it returns at once.
func (c *Client) WaitReady(ctx context.Context, obj *unstructured.Unstructured, opts WaitOptions) error {
	gvk := obj.GroupVersionKind()
	ns, name := obj.GetNamespace(), obj.GetName()
	switch {
	case gvk.Group == "ray.io" && gvk.Kind == "RayCluster":
		return c.WaitClusterReady(ctx, ns, name, opts)
	case gvk.Group == "ray.io" && gvk.Kind == "RayJob":
		return c.WaitJobRunning(ctx, ns, name, opts)
	case gvk.Group == "ray.io" && gvk.Kind == "RayService":
		return c.WaitServiceReady(ctx, ns, name, opts)
	case gvk.Group == "apps" && gvk.Kind == "Deployment":
		return c.WaitDeploymentReady(ctx, ns, name, opts)
	}
	return nil
}

// DeleteObjects deletes objects in reverse order (the reverse of the order
// Apply takes them in), ignoring those already gone. With opts.Wait it
// waits until each is gone before deleting the one before it.
func (c *Client) DeleteObjects(ctx context.Context, objs []*unstructured.Unstructured, opts DeleteOptions) error {
	if c.apply == nil {
		return errors.New("rayctl: DeleteObjects needs a dynamic client (Client.WithDynamic)")
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i].DeepCopy()
		ri, _, err := c.apply.resource(obj, c.namespace)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // its CRD is already gone, and so is it
			}
			return err
		}
		err = ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete %s %s: %w", obj.GetKind(), describeObj(obj), err)
		}
		c.log.InfoContext(ctx, "deleted", "kind", obj.GetKind(), "object", describeObj(obj))
		if opts.Wait {
			err := wait.PollUntilContextTimeout(ctx, c.poll, timeout, true, func(ctx context.Context) (bool, error) {
				_, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return false, err
			})
			if err != nil {
				return fmt.Errorf("wait for %s %s to go: %w", obj.GetKind(), describeObj(obj), err)
			}
		}
	}
	return nil
}

func describeObj(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
