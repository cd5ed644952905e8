package operator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/operatorbuild"
)

// StartResources is what one group's Ray nodes announce to Ray: the
// resources in the `ray start` command KubeRay v1.6.0 generates for them.
type StartResources struct {
	Group string `json:"group"` // "head" or the worker group's name
	// CPU, GPU and Memory (bytes) are whole numbers: KubeRay rounds
	// container quantities up (500m CPU → 1).
	CPU    *int64 `json:"cpu,omitempty"`
	GPU    *int64 `json:"gpu,omitempty"`
	Memory *int64 `json:"memory,omitempty"`
	// Custom are the --resources entries (fleet tags, TPU, neuron_cores…).
	Custom map[string]float64 `json:"custom,omitempty"`
	// Command is the generated `ray start …` command.
	Command string `json:"command"`
}

// ComputeStartResources builds the pods KubeRay v1.6.0 builds from a copy
// of spec (package rayctl/operatorbuild, held to the operator's
// DefaultHeadPodTemplate / DefaultWorkerPodTemplate and BuildPod by its
// differential test), and reads back the `ray start` command generated
// for the head and each worker group: so the precedence (group resources
// over rayStartParams over container limits, CPU falling back to
// requests, GPUs and accelerators from limits only) and the rounding are
// the operator's. Groups that
// KubeRay would reject (resources in both the group and rayStartParams)
// are an error naming the group. The resources do not depend on the
// cluster's name: name is accepted for callers' symmetry and not used.
func ComputeStartResources(_ string, spec *rayv1.RayClusterSpec) ([]StartResources, error) {
	pods, err := operatorPods(spec)
	if err != nil {
		return nil, err
	}
	return startResourcesOf(pods)
}

// startResourcesOf reads the `ray start` command of each pod the operator
// builds.
func startResourcesOf(pods []builtPod) ([]StartResources, error) {
	var out []StartResources
	for _, p := range pods {
		sr, err := readStartCommand(p.group, p.pod.Spec.Containers[0].Env)
		if err != nil {
			return nil, err
		}
		out = append(out, sr)
	}
	return out, nil
}

// builtPod is a pod as the operator builds it for a group ("head", or the
// worker group's name).
type builtPod struct {
	group string
	pod   corev1.Pod
}

// operatorPodsCluster is the name of the cluster operatorPods builds the
// pods of.
const operatorPodsCluster = "cluster"

// operatorPods builds, as KubeRay v1.6.0 does, from a copy of spec the
// head's pod, then each worker group's. The pods are built for a cluster
// of a short stand-in name, and without the head's service account name:
// names do not change what is checked of them.
func operatorPods(spec *rayv1.RayClusterSpec) ([]builtPod, error) {
	const name = operatorPodsCluster
	rc := rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: *asStored(spec)}
	rc.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName = ""
	if err := rayctl.OperatorClusterSpecError(&rc.Spec, nil); err != nil {
		return nil, fmt.Errorf("KubeRay rejects this cluster spec: %w", err)
	}
	autoscaling := ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false)
	headPort := operatorbuild.HeadPort(rc.Spec.HeadGroupSpec.RayStartParams)
	fqdn := name + "-head-svc.default.svc.cluster.local"

	head := rc.Spec.HeadGroupSpec
	tmpl := operatorbuild.HeadPodTemplate(rc, head, name+"-head", headPort)
	out := []builtPod{{"head", operatorbuild.Pod(tmpl, rayv1.HeadNode, head.RayStartParams, headPort, autoscaling, operatorbuild.RayCluster, fqdn, nil, rc.Spec.RayVersion)}}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		tmpl := operatorbuild.WorkerPodTemplate(rc, g, name+"-"+g.GroupName+"-worker", fqdn, headPort, "", 0, 0)
		out = append(out, builtPod{g.GroupName, operatorbuild.Pod(tmpl, rayv1.WorkerNode, g.RayStartParams, headPort, autoscaling, operatorbuild.RayCluster, fqdn, nil, rc.Spec.RayVersion)})
	}
	return out, nil
}

// asStored is a copy of a cluster spec as the operator has it when it
// builds (operatorbuild.SetDefaults).
func asStored(spec *rayv1.RayClusterSpec) *rayv1.RayClusterSpec {
	s := spec.DeepCopy()
	operatorbuild.SetDefaults(s)
	return s
}

var startFlag = regexp.MustCompile(`--([a-z0-9-]+)(?:=('[^']*'|"[^"]*"|\S+))?`)

func readStartCommand(group string, env []corev1.EnvVar) (StartResources, error) {
	sr := StartResources{Group: group}
	for _, e := range env {
		if e.Name == operatorbuild.GeneratedStartCommandEnv {
			sr.Command = e.Value
		}
	}
	if sr.Command == "" {
		return sr, fmt.Errorf("group %s: KubeRay generated no ray start command", group)
	}
	for _, m := range startFlag.FindAllStringSubmatch(sr.Command, -1) {
		key, value := m[1], strings.Trim(m[2], `'"`)
		switch key {
		case "num-cpus", "num-gpus", "memory":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return sr, fmt.Errorf("group %s: --%s=%s is not a whole number (ray start refuses it)", group, key, value)
			}
			switch key {
			case "num-cpus":
				sr.CPU = &n
			case "num-gpus":
				sr.GPU = &n
			default:
				sr.Memory = &n
			}
		case "resources":
			custom := map[string]float64{}
			if err := json.Unmarshal([]byte(strings.Trim(value, "`")), &custom); err != nil {
				return sr, fmt.Errorf("group %s: --resources=%s is not a JSON object of numbers: %v", group, m[2], err)
			}
			sr.Custom = custom
		}
	}
	return sr, nil
}

// String formats the resources the way `check` prints them.
func (s StartResources) String() string {
	var parts []string
	show := func(name string, v *int64) {
		if v == nil {
			parts = append(parts, name+"=unset")
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", name, *v))
		}
	}
	show("CPU", s.CPU)
	show("GPU", s.GPU)
	if s.Memory != nil {
		parts = append(parts, "memory="+humanBytes(*s.Memory))
	} else {
		parts = append(parts, "memory=unset")
	}
	keys := make([]string, 0, len(s.Custom))
	for k := range s.Custom {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, s.Custom[k]))
	}
	return s.Group + ": " + strings.Join(parts, " ")
}

func humanBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
