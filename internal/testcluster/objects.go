package testcluster

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"gridweave.dev/gridweave/crd"
)

// FieldManager is the server-side-apply field manager of the harness.
const FieldManager = "gridweave-testcluster"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyKubeRayCRDs applies KubeRay's CRDs (RayCluster, RayJob, RayService,
// RayCronJob at KubeRayVersion) with server-side apply — they are too large
// for client-side apply's last-applied annotation — and waits until each is
// Established. It returns the applied objects as the server stored them.
func (c *Cluster) ApplyKubeRayCRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(c.Binaries.KubeRayCRDs, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", c.Binaries.KubeRayCRDs)
	}
	slices.Sort(files)
	objs := make([]*unstructured.Unstructured, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		objs = append(objs, obj)
	}
	return c.applyCRDs(ctx, objs)
}

// ApplyGridweaveCRDs applies Gridweave's own CRDs (GridweaveJob,
// GridweaveEndpoint: gridweave/crd) like ApplyKubeRayCRDs.
func (c *Cluster) ApplyGridweaveCRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	objs, err := crd.Objects()
	if err != nil {
		return nil, err
	}
	return c.applyCRDs(ctx, objs)
}

// applyCRDs server-side-applies CRDs and waits until each is Established.
func (c *Cluster) applyCRDs(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	applied := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		out, err := c.Dynamic.Resource(crdResource).Apply(ctx, obj.GetName(), obj,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return nil, fmt.Errorf("apply CRD %s: %w", obj.GetName(), err)
		}
		applied = append(applied, out)
	}
	for i, crd := range applied {
		name := crd.GetName()
		err := c.poll(ctx, "CRD "+name+" to be Established", func(ctx context.Context) (bool, error) {
			got, err := c.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conditions {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					applied[i] = got
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return applied, nil
}

// Defaults that AddNode fills in when the caller's allocatable lacks them,
// so that ordinary pods fit on any fake node.
var defaultNodeAllocatable = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("32"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// KwokNode is a Node that kwok manages, for a test to create (AddNode, or
// a stand-in for a node's k3s agent). allocatable is also its capacity;
// cpu, memory and pods default to 32, 256Gi and 110 when absent (pass e.g.
// "nvidia.com/gpu": "8" for a GPU node). labels are added to kubernetes.io/hostname=name and the
// os/arch labels a kubelet sets, stable and beta (the controller-manager
// adds the beta ones to a Node that lacks them, a write a test that
// watches the Node would see). podCIDR, if not empty, becomes spec.podCIDR.
func KwokNode(name string, allocatable corev1.ResourceList, labels map[string]string, podCIDR string) (*corev1.Node, error) {
	resources := maps.Clone(defaultNodeAllocatable)
	maps.Copy(resources, allocatable)
	nodeLabels := map[string]string{
		corev1.LabelHostname:      name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
		"type":                    "kwok",
	}
	maps.Copy(nodeLabels, labels)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      nodeLabels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue, "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Allocatable: resources,
			Capacity:    resources,
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "kwok-" + KwokVersion, OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	if podCIDR != "" {
		// The API server accepts leading zeros ("198.18.00.0/24"); kwok
		// cannot parse them and gives every pod on the node 127.0.0.1,
		// which no EndpointSlice may hold. Refuse such a CIDR here.
		if _, err := netip.ParsePrefix(podCIDR); err != nil {
			return nil, fmt.Errorf("node %s: pod CIDR: %w", name, err)
		}
		node.Spec.PodCIDR = podCIDR
		node.Spec.PodCIDRs = []string{podCIDR}
	}
	return node, nil
}

// AddNode creates a fake node that kwok manages (see KwokNode) and waits
// until it is Ready and schedulable.
func (c *Cluster) AddNode(ctx context.Context, name string, allocatable corev1.ResourceList, labels map[string]string, podCIDR string) (*corev1.Node, error) {
	node, err := KwokNode(name, allocatable, labels, podCIDR)
	if err != nil {
		return nil, err
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	var ready *corev1.Node
	err = c.poll(ctx, "node "+name+" to be Ready and untainted", func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range got.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				return false, nil
			}
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = got
				return true, nil
			}
		}
		return false, nil
	})
	return ready, err
}

// CreateNamespace creates a namespace and waits for its default
// ServiceAccount, without which no pod can be created in it.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return c.WaitForServiceAccount(ctx, name)
}

// WaitForServiceAccount waits until the namespace's default ServiceAccount exists.
func (c *Cluster) WaitForServiceAccount(ctx context.Context, namespace string) error {
	return c.poll(ctx, "ServiceAccount "+namespace+"/default", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// poll checks cond every 100ms until it reports true, returns an error, or
// the start timeout passes; the timeout error names what was awaited.
func (c *Cluster) poll(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, c.timeout, true, cond)
	if err != nil {
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

// AppendPodLog appends lines to PodLogFile, stamped now, as stdout in the
// CRI log format that kwok serves as every container's log.
func (c *Cluster) AppendPodLog(lines ...string) error {
	f, err := os.OpenFile(c.PodLogFile, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, line := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", now, line); err != nil {
			return err
		}
	}
	return nil
}
