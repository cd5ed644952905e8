package launch

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"gridweave.dev/manifest"
)

// launchKinds are the kinds Run applies, deleted by Down in this order
// (the Ray objects first, so their pods stop before the sandbox goes).
var launchKinds = []schema.GroupVersionResource{
	{Group: "ray.io", Version: "v1", Resource: "rayjobs"},
	{Group: "ray.io", Version: "v1", Resource: "rayclusters"},
	{Group: "ray.io", Version: "v1", Resource: "rayservices"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "", Version: "v1", Resource: "services"},
}

// Selector selects what Run applied for the launch called name.
func Selector(name string) string {
	return "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/managed-by=" + manifest.ManagedBy
}

// Down deletes what Run applied for the launch called name (found by its
// labels, so nothing else) and waits until it and its pods are gone. A
// launch already gone is not an error. It returns what it deleted.
func (s *Session) Down(ctx context.Context, namespace, name string, timeout time.Duration) ([]string, error) {
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	var deleted []string
	// The Ray clusters whose pods go too: those deleted, and a deleted
	// RayJob's generated one.
	clusters := map[string]bool{}
	for _, gvr := range launchKinds {
		ri := s.Dynamic.Resource(gvr).Namespace(namespace)
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: Selector(name)})
		if err != nil {
			return deleted, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		for _, o := range list.Items {
			switch o.GetKind() {
			case "RayCluster":
				clusters[o.GetName()] = true
			case "RayJob":
				if c, _, _ := unstructured.NestedString(o.Object, "status", "rayClusterName"); c != "" {
					clusters[c] = true
				}
			}
			err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
			if err != nil && !apierrors.IsNotFound(err) {
				return deleted, fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
			}
			deleted = append(deleted, o.GetKind()+"/"+o.GetName())
			s.say("deleting %s %s/%s", o.GetKind(), namespace, o.GetName())
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		left, err := s.leftOf(ctx, namespace, name, clusters)
		if err != nil {
			return deleted, err
		}
		if left == 0 {
			if len(deleted) == 0 {
				s.say("nothing of launch %s in namespace %s", name, namespace)
			} else {
				s.say("launch %s/%s is gone", namespace, name)
			}
			return deleted, nil
		}
		if time.Now().After(deadline) {
			return deleted, fmt.Errorf("launch %s/%s: %d objects or pods still there after %s", namespace, name, left, timeout)
		}
		select {
		case <-ctx.Done():
			return deleted, ctx.Err()
		case <-time.After(min(s.poll(), time.Second)):
		}
	}
}

// leftOf counts what Down deleted that is still present: the launch's
// objects (by its labels), their pods (sandbox pods carry the labels too)
// and the pods of the Ray clusters it deleted. Nothing else of the same
// name is waited for.
func (s *Session) leftOf(ctx context.Context, namespace, name string, clusters map[string]bool) (int, error) {
	n := 0
	for _, gvr := range launchKinds {
		list, err := s.Dynamic.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector(name)})
		if err != nil {
			return 0, err
		}
		n += len(list.Items)
	}
	selectors := []string{Selector(name)}
	for c := range clusters {
		selectors = append(selectors, "ray.io/cluster="+c)
	}
	for _, sel := range selectors {
		pods, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return 0, err
		}
		n += len(pods.Items)
	}
	return n, nil
}
