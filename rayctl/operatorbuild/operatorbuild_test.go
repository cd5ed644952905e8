package operatorbuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// What this package builds must be what the KubeRay operator's own
// builders build (they are imported here, in a test, and nowhere else).
// Every mutation below is applied alone and in every pair to a cluster;
// both implementations then build its pods (for each kind of owner), its
// Services, its Ingress and its submitter, each from its own copy, and
// must build the same objects.

// ctx carries a logger that drops the operator's log lines.
var ctx = ctrl.LoggerInto(context.Background(), logr.Discard())

type cluster struct {
	name        string
	spec        rayv1.RayClusterSpec
	annotations map[string]string
	service     rayv1.RayServiceSpec
}

type mutation struct {
	name  string
	apply func(c *cluster)
}

func head(c *cluster) *corev1.Container { return &c.spec.HeadGroupSpec.Template.Spec.Containers[0] }
func worker(c *cluster) *corev1.Container {
	return &c.spec.WorkerGroupSpecs[0].Template.Spec.Containers[0]
}

func quantities(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

var mutations = []mutation{
	{"autoscaling", func(c *cluster) { c.spec.EnableInTreeAutoscaling = ptr.To(true) }},
	{"autoscaler v2", func(c *cluster) {
		c.spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
	}},
	{"autoscaler options", func(c *cluster) {
		c.spec.EnableInTreeAutoscaling = ptr.To(true)
		c.spec.AutoscalerOptions = &rayv1.AutoscalerOptions{
			Image: ptr.To("autoscaler:1"), ImagePullPolicy: ptr.To(corev1.PullAlways),
			Resources:       &corev1.ResourceRequirements{Limits: quantities("cpu", "1")},
			Env:             []corev1.EnvVar{{Name: "A", Value: "1"}},
			EnvFrom:         []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			VolumeMounts:    []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
		}
	}},
	{"head service account", func(c *cluster) { c.spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "ray-head" }},
	{"long digit service account", func(c *cluster) {
		c.spec.HeadGroupSpec.Template.Spec.ServiceAccountName = "9" + strings.Repeat("a", 60)
	}},
	{"token auth", func(c *cluster) { c.spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken} }},
	{"kubernetes token auth", func(c *cluster) {
		c.spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
	}},
	{"token auth secret", func(c *cluster) {
		c.spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, SecretName: ptr.To("my-token")}
	}},
	{"auth disabled", func(c *cluster) { c.spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeDisabled} }},
	{"ft annotation", func(c *cluster) { c.annotations[rayutils.RayFTEnabledAnnotationKey] = "TRUE" }},
	{"ft options", func(c *cluster) {
		c.spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{
			RedisAddress:  "redis:6379",
			RedisUsername: &rayv1.RedisCredential{Value: "ray"},
			RedisPassword: &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "password"}}},
			ExternalStorageNamespace: "ns-1",
		}
	}},
	{"ft redis password param", func(c *cluster) {
		c.annotations[rayutils.RayFTEnabledAnnotationKey] = "true"
		c.spec.HeadGroupSpec.RayStartParams["redis-password"] = "secret"
	}},
	{"external storage annotation", func(c *cluster) {
		c.annotations[rayutils.RayExternalStorageNSAnnotationKey] = "ns-2"
	}},
	{"worker reconnect timeout set", func(c *cluster) {
		worker(c).Env = append(worker(c).Env, corev1.EnvVar{Name: rayutils.RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S, Value: "60"})
	}},
	{"overwrite command", func(c *cluster) { c.annotations[rayutils.RayOverwriteContainerCmdAnnotationKey] = "True" }},
	{"own ray start", func(c *cluster) {
		head(c).Command = []string{"/bin/sh", "-c"}
		head(c).Args = []string{"ray start --head --block"}
	}},
	{"worker args", func(c *cluster) { worker(c).Args = []string{"echo", "hello"} }},
	{"plasma directory", func(c *cluster) { c.spec.WorkerGroupSpecs[0].RayStartParams["plasma-directory"] = "/tmp" }},
	{"group resources", func(c *cluster) {
		c.spec.HeadGroupSpec.Resources = map[string]string{"CPU": "2", "memory": "4Gi", "nvidia.com/gpu": "1", "TPU": "4", "bad": "x y"}
		c.spec.WorkerGroupSpecs[0].Resources = map[string]string{"custom": "500m"}
	}},
	{"group labels", func(c *cluster) {
		c.spec.HeadGroupSpec.Labels = map[string]string{"zone": "a", "app.kubernetes.io/name": "mine"}
		c.spec.WorkerGroupSpecs[0].Labels = map[string]string{"ray.io/group": "other", "b": "2"}
	}},
	{"template labels", func(c *cluster) {
		c.spec.HeadGroupSpec.Template.Labels = map[string]string{"ray.io/identifier": "x", "app.kubernetes.io/created-by": "me"}
		c.spec.WorkerGroupSpecs[0].Template.Labels = map[string]string{"ray.io/cluster": "y", "t": "1"}
	}},
	{"template annotations", func(c *cluster) {
		c.spec.HeadGroupSpec.Template.Annotations = map[string]string{"a": "1"}
	}},
	{"gpu limits", func(c *cluster) {
		worker(c).Resources = corev1.ResourceRequirements{Limits: quantities("cpu", "1500m", "memory", "3G", "nvidia.com/gpu", "2")}
	}},
	{"mig and tpu", func(c *cluster) {
		worker(c).Resources = corev1.ResourceRequirements{Limits: quantities("nvidia.com/mig-2g.32gb", "1", "google.com/tpu", "4", "aws.amazon.com/neuroncore", "2")}
	}},
	{"neuron with resources param", func(c *cluster) {
		worker(c).Resources = corev1.ResourceRequirements{Limits: quantities("aws.amazon.com/neuroncore", "2")}
		c.spec.WorkerGroupSpecs[0].RayStartParams["resources"] = `'{"x": 1}'`
	}},
	{"tpu already in resources", func(c *cluster) {
		worker(c).Resources = corev1.ResourceRequirements{Limits: quantities("google.com/tpu", "4")}
		c.spec.WorkerGroupSpecs[0].RayStartParams["resources"] = `"{\"TPU\": 8}"`
	}},
	{"malformed resources param", func(c *cluster) {
		worker(c).Resources = corev1.ResourceRequirements{Limits: quantities("nvidia.com/gpu", "1")}
		c.spec.WorkerGroupSpecs[0].RayStartParams["resources"] = `{oops`
	}},
	{"requests only", func(c *cluster) {
		head(c).Resources = corev1.ResourceRequirements{Requests: quantities("cpu", "2", "memory", "1Gi")}
	}},
	{"start params given", func(c *cluster) {
		c.spec.WorkerGroupSpecs[0].RayStartParams["num-cpus"] = "3"
		c.spec.WorkerGroupSpecs[0].RayStartParams["memory"] = "100"
		c.spec.WorkerGroupSpecs[0].RayStartParams["num-gpus"] = "0"
		c.spec.WorkerGroupSpecs[0].RayStartParams["address"] = "elsewhere:1"
	}},
	{"switch params", func(c *cluster) {
		p := c.spec.HeadGroupSpec.RayStartParams
		p["log-color"], p["include-dashboard"], p["disable-usage-stats"], p["verbose"] = "false", "False", "TRUE", "false"
	}},
	{"ports in params", func(c *cluster) {
		p := c.spec.HeadGroupSpec.RayStartParams
		p["port"], p["dashboard-port"], p["dashboard-agent-listen-port"], p["metrics-export-port"] = "6380", "8266", "52366", "9090"
		c.spec.WorkerGroupSpecs[0].RayStartParams["dashboard-agent-listen-port"] = "not-a-port"
	}},
	{"custom head ports", func(c *cluster) {
		head(c).Ports = []corev1.ContainerPort{{Name: "gcs", ContainerPort: 6379}, {ContainerPort: 9999}, {Name: "dashboard", ContainerPort: 8265}}
	}},
	{"serve ports", func(c *cluster) {
		head(c).Ports = []corev1.ContainerPort{{Name: "serve", ContainerPort: 8000}, {Name: "serve-grpc", ContainerPort: 9000},
			{Name: "metrics", ContainerPort: 8081}, {Name: "dashboard", ContainerPort: 8266}}
		worker(c).Ports = []corev1.ContainerPort{{Name: "serve", ContainerPort: 8001}}
	}},
	{"head service", func(c *cluster) {
		c.spec.HeadGroupSpec.HeadService = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "my-head", Namespace: "other", Labels: map[string]string{"ray.io/cluster": "z", "l": "1"},
				Annotations: map[string]string{"a": "1"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"x": "y"}, Ports: []corev1.ServicePort{{Name: "extra", Port: 1234}}},
		}
	}},
	{"head service typed", func(c *cluster) {
		c.spec.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	}},
	{"node port", func(c *cluster) { c.spec.HeadGroupSpec.ServiceType = corev1.ServiceTypeNodePort }},
	{"cluster ip", func(c *cluster) { c.spec.HeadGroupSpec.ServiceType = corev1.ServiceTypeClusterIP }},
	{"ray 2.52", func(c *cluster) { c.spec.RayVersion = "2.52.0" }},
	{"ray nightly", func(c *cluster) { c.spec.RayVersion = "nightly" }},
	{"ray pre-release", func(c *cluster) { c.spec.RayVersion = "2.7.0-rc1" }},
	{"own probes", func(c *cluster) {
		head(c).LivenessProbe = &corev1.Probe{TimeoutSeconds: 9}
		worker(c).ReadinessProbe = &corev1.Probe{PeriodSeconds: 7}
	}},
	{"own shm", func(c *cluster) {
		worker(c).VolumeMounts = []corev1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}}
		c.spec.WorkerGroupSpecs[0].Template.Spec.Volumes = []corev1.Volume{{Name: "shm"}}
	}},
	{"own shm volume name", func(c *cluster) {
		c.spec.HeadGroupSpec.Template.Spec.Volumes = []corev1.Volume{{Name: "shared-mem"}, {Name: "ray-logs"}}
	}},
	{"memory limit for shm", func(c *cluster) {
		head(c).Resources = corev1.ResourceRequirements{Limits: quantities("memory", "2Gi"), Requests: quantities("memory", "1Gi")}
	}},
	{"env preset", func(c *cluster) {
		for _, ctr := range []*corev1.Container{head(c), worker(c)} {
			ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "RAY_ADDRESS", Value: "x"}, corev1.EnvVar{Name: "RAY_PORT", Value: "1"},
				corev1.EnvVar{Name: "RAY_AUTH_MODE", Value: "token"}, corev1.EnvVar{Name: "RAY_USAGE_STATS_KUBERAY_IN_USE", Value: "0"},
				corev1.EnvVar{Name: "RAY_timeout_ms_task_wait_for_death_info", Value: "1"})
		}
	}},
	{"multi-host", func(c *cluster) { c.spec.WorkerGroupSpecs[0].NumOfHosts = 2 }},
	{"own wait container", func(c *cluster) {
		c.spec.WorkerGroupSpecs[0].Template.Spec.InitContainers = []corev1.Container{{Name: "wait-gcs-ready", Image: "busybox"}}
	}},
	{"worker security context", func(c *cluster) {
		worker(c).SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		worker(c).ImagePullPolicy = corev1.PullNever
	}},
	{"long name", func(c *cluster) { c.name = "a" + strings.Repeat("b", 70) }},
	{"punctuated name", func(c *cluster) { c.name = "-x" }},
	{"ingress class", func(c *cluster) {
		c.annotations["kubernetes.io/ingress.class"] = "nginx"
		c.annotations["nginx.ingress.kubernetes.io/rewrite-target"] = "/$1"
	}},
	{"serve service", func(c *cluster) {
		c.service.ServeService = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"s": "1"}, Namespace: "elsewhere"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "serve", Port: 80, AppProtocol: ptr.To("http")}, {Name: "other", Port: 81}},
				Selector: map[string]string{"a": "b"}},
		}
	}},
	{"serve service typed", func(c *cluster) {
		c.service.ServeService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
	}},
	{"one host", func(c *cluster) { c.spec.WorkerGroupSpecs[0].NumOfHosts = 1 }},
	{"service's own type", func(c *cluster) { c.service.RayClusterSpec.HeadGroupSpec.ServiceType = corev1.ServiceTypeLoadBalancer }},
	{"head init container", func(c *cluster) {
		c.spec.HeadGroupSpec.Template.Spec.InitContainers = []corev1.Container{{Name: "wait-gcs-ready", Image: "busybox"}, {Name: "setup"}}
	}},
	{"guarded env preset", func(c *cluster) {
		head(c).Env = append(head(c).Env, corev1.EnvVar{Name: "RAY_external_storage_namespace", Value: "mine"}, corev1.EnvVar{Name: "REDIS_PASSWORD", Value: "p"})
		head(c).VolumeMounts = append(head(c).VolumeMounts, corev1.VolumeMount{Name: "ray-token", MountPath: "/elsewhere"})
		c.spec.WorkerGroupSpecs[0].Template.Spec.Volumes = append(c.spec.WorkerGroupSpecs[0].Template.Spec.Volumes, corev1.Volume{Name: "ray-token"})
	}},
	{"ft password only", func(c *cluster) {
		c.spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379", RedisPassword: &rayv1.RedisCredential{Value: "p"}}
	}},
	{"second worker group", func(c *cluster) {
		g := *c.spec.WorkerGroupSpecs[0].DeepCopy()
		g.GroupName = "CPU-Group"
		g.RayStartParams = map[string]string{}
		c.spec.WorkerGroupSpecs = append(c.spec.WorkerGroupSpecs, g)
	}},
}

func baseCluster() cluster {
	c := cluster{
		name:        "raycluster",
		annotations: map[string]string{},
		spec: rayv1.RayClusterSpec{
			RayVersion: "2.54.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ray-head", Image: "rayproject/ray:2.54.0",
					Resources: corev1.ResourceRequirements{Limits: quantities("cpu", "1", "memory", "2Gi")},
				}}}},
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "gpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](math.MaxInt32),
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ray-worker", Image: "gridweave-worker:latest",
					Env: []corev1.EnvVar{{Name: "TLS", Value: "1"}},
				}}}},
			}},
		},
	}
	c.service.RayClusterSpec = *c.spec.DeepCopy()
	return c
}

func (c cluster) rayCluster() rayv1.RayCluster {
	return rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: "ns", UID: "uid-1", Annotations: c.annotations}, Spec: c.spec}
}

// copyOf is a deep copy of a cluster: each implementation builds from its
// own, since both change what they are given.
func (c cluster) copyOf() cluster {
	out := c
	out.spec = *c.spec.DeepCopy()
	out.annotations = map[string]string{}
	for k, v := range c.annotations {
		out.annotations[k] = v
	}
	out.service = *c.service.DeepCopy()
	return out
}

func TestBuildsAgreeWithKubeRay(t *testing.T) {
	cases := 0
	check := func(names []string) {
		c := baseCluster()
		for _, i := range names {
			for _, m := range mutations {
				if m.name == i {
					m.apply(&c)
				}
			}
		}
		cases++
		compareBuilds(t, strings.Join(names, " + "), c)
	}
	check(nil)
	for i := range mutations {
		check([]string{mutations[i].name})
		for j := i + 1; j < len(mutations); j++ {
			check([]string{mutations[i].name, mutations[j].name})
		}
	}
	if want := 1 + len(mutations)*(len(mutations)+1)/2; cases != want {
		t.Fatalf("%d cases built, want %d", cases, want)
	}
}

func compareBuilds(t *testing.T, name string, c cluster) {
	t.Helper()
	same := func(what string, theirs, ours any) {
		t.Helper()
		if !equality.Semantic.DeepEqual(theirs, ours) {
			t.Errorf("%s: %s differs from KubeRay's (-KubeRay +ours):\n%s", name, what, cmp.Diff(theirs, ours))
		}
	}
	for _, creator := range []CRD{RayCluster, RayJob, RayService} {
		theirs, ours := c.copyOf(), c.copyOf()
		autoscaling := ptr.Deref(c.spec.EnableInTreeAutoscaling, false)
		fqdn := c.name + "-head-svc.ns.svc.cluster.local"
		{
			a, b := theirs.rayCluster(), ours.rayCluster()
			port := common.GetHeadPort(a.Spec.HeadGroupSpec.RayStartParams)
			same("the head port", port, HeadPort(b.Spec.HeadGroupSpec.RayStartParams))
			ta := common.DefaultHeadPodTemplate(ctx, a, a.Spec.HeadGroupSpec, c.name+"-head", port)
			tb := HeadPodTemplate(b, b.Spec.HeadGroupSpec, c.name+"-head", port)
			same(string(creator)+"'s head template", ta, tb)
			defaults := []corev1.EnvVar{{Name: "RAY_ADDRESS", Value: "given"}, {Name: "EXTRA", Value: "1"}}
			pa := common.BuildPod(ctx, ta, rayv1.HeadNode, a.Spec.HeadGroupSpec.RayStartParams, port, autoscaling, rayutils.CRDType(creator), fqdn, defaults, c.spec.RayVersion)
			pb := Pod(tb, rayv1.HeadNode, b.Spec.HeadGroupSpec.RayStartParams, port, autoscaling, creator, fqdn, defaults, c.spec.RayVersion)
			same(string(creator)+"'s head pod", pa, pb)
			same("the changed head params", a.Spec.HeadGroupSpec.RayStartParams, b.Spec.HeadGroupSpec.RayStartParams)
		}
		for i := range c.spec.WorkerGroupSpecs {
			a, b := theirs.rayCluster(), ours.rayCluster()
			ga, gb := a.Spec.WorkerGroupSpecs[i], b.Spec.WorkerGroupSpecs[i]
			defaults := []corev1.EnvVar{{Name: "TLS", Value: "0"}, {Name: "EXTRA", Value: "1"}}
			ta := common.DefaultWorkerPodTemplate(ctx, a, ga, c.name+"-"+ga.GroupName+"-worker", fqdn, "6379", "replica-a", 3, 1)
			tb := WorkerPodTemplate(b, gb, c.name+"-"+gb.GroupName+"-worker", fqdn, "6379", "replica-a", 3, 1)
			same(string(creator)+"'s worker template", ta, tb)
			pa := common.BuildPod(ctx, ta, rayv1.WorkerNode, ga.RayStartParams, "6379", autoscaling, rayutils.CRDType(creator), fqdn, defaults, c.spec.RayVersion)
			pb := Pod(tb, rayv1.WorkerNode, gb.RayStartParams, "6379", autoscaling, creator, fqdn, defaults, c.spec.RayVersion)
			same(string(creator)+"'s worker pod", pa, pb)
		}
		// What the builders changed of what they were given (they share
		// maps and slices with it).
		same(string(creator)+"'s cluster spec after building its pods", theirs.spec, ours.spec)
	}
	theirs, ours := c.copyOf(), c.copyOf()
	a, b := theirs.rayCluster(), ours.rayCluster()
	for _, labels := range []map[string]string{nil, {"app.kubernetes.io/name": "mine", "other": "x"}} {
		sa, err := common.BuildServiceForHeadPod(ctx, a, labels, map[string]string{"note": "1"})
		if err != nil {
			t.Fatalf("%s: KubeRay's head Service: %v", name, err)
		}
		same("the head Service", sortedPorts(sa), sortedPorts(HeadService(b, labels, map[string]string{"note": "1"})))
	}
	job := rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "jobs"}}
	sa, _ := common.BuildHeadServiceForRayJob(ctx, job, a)
	same("the RayJob's head Service", sortedPorts(sa), sortedPorts(HeadServiceForRayJob(job, b)))
	svcA := rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "serving"}, Spec: theirs.service}
	svcB := rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "serving"}, Spec: ours.service}
	sa, _ = common.BuildHeadServiceForRayService(ctx, svcA, a)
	same("the RayService's head Service", sortedPorts(sa), sortedPorts(HeadServiceForRayService(svcB, b)))
	for _, forService := range []bool{false, true} {
		sa, errA := common.BuildServeService(ctx, svcA, a, forService)
		sb, errB := ServeService(svcB, b, forService)
		same(fmt.Sprintf("the serve Service (RayService %v)", forService), sortedPorts(sa), sortedPorts(sb))
		same(fmt.Sprintf("whether the serve Service fails (RayService %v)", forService), errA != nil, errors.Is(errB, ErrNoServePort))
	}
	ia, err := common.BuildIngressForHeadService(ctx, a)
	if err != nil {
		t.Fatalf("%s: KubeRay's Ingress: %v", name, err)
	}
	same("the Ingress", ia, Ingress(b))
	js := rayv1.RayJobSpec{}
	same("the submitter template", common.GetSubmitterTemplate(&js, &a.Spec), SubmitterTemplate(&js, &b.Spec))
	if len(b.Spec.WorkerGroupSpecs) > 0 {
		js.SubmitterPodTemplate = &b.Spec.WorkerGroupSpecs[0].Template
		same("a given submitter template", common.GetSubmitterTemplate(&js, &a.Spec), SubmitterTemplate(&js, &b.Spec))
	}
	for _, ctr := range []corev1.Container{*a.Spec.HeadGroupSpec.Template.Spec.Containers[0].DeepCopy(), {Env: []corev1.EnvVar{{Name: "RAY_AUTH_TOKEN", Value: "t"}}}} {
		ca, cb := *ctr.DeepCopy(), *ctr.DeepCopy()
		common.SetContainerTokenAuthEnvVars(c.name, &ca, a.Spec.AuthOptions)
		SetTokenAuthEnv(c.name, &cb, b.Spec.AuthOptions)
		same("the token env", ca, cb)
	}
	same("fault tolerance", rayutils.IsGCSFaultToleranceEnabled(&a.Spec, c.annotations), GCSFaultToleranceOn(&b.Spec, c.annotations))
	same("auth", rayutils.IsAuthEnabled(&a.Spec), AuthOn(&b.Spec))
	same("the cluster's spec after building", theirs.spec, ours.spec)
}

// sortedPorts: the operator leaves the ports of some Services in a map's
// order; this package sorts them by name.
func sortedPorts(svc *corev1.Service) *corev1.Service {
	if svc == nil {
		return nil
	}
	out := svc.DeepCopy()
	slices.SortStableFunc(out.Spec.Ports, func(x, y corev1.ServicePort) int { return strings.Compare(x.Name, y.Name) })
	return out
}

func TestNamesAgreeWithKubeRay(t *testing.T) {
	for _, s := range []string{"a", "raycluster", "9lives", "-dash", "_under", ".dot", strings.Repeat("x", 50), strings.Repeat("y", 51) + "Z",
		"1" + strings.Repeat("z", 70), strings.Repeat("q", 63), "-" + strings.Repeat("q", 63), "UPPER-Case"} {
		if got, want := CheckedName(s), rayutils.CheckName(s); got != want {
			t.Errorf("CheckedName(%q) = %q, KubeRay's %q", s, got, want)
		}
		if got, want := CheckedLabel(s), rayutils.CheckLabel(s); got != want {
			t.Errorf("CheckedLabel(%q) = %q, KubeRay's %q", s, got, want)
		}
		for _, nodeType := range []rayv1.RayNodeType{rayv1.HeadNode, rayv1.WorkerNode} {
			for _, generate := range []bool{false, true} {
				if got, want := PodName(s, nodeType, generate), rayutils.PodName(s, nodeType, generate); got != want {
					t.Errorf("PodName(%q, %s, %v) = %q, KubeRay's %q", s, nodeType, generate, got, want)
				}
			}
		}
	}
}

func TestMetadataJSONAgreesWithKubeRay(t *testing.T) {
	metadata := map[string]string{"team": "ml", "run": "7"}
	for _, v := range []string{"2.54.0", "2.6.0", "2.5.9", "2.7.0-rc1", "nightly", "", "3", "v2.10"} {
		want, wantErr := common.GetMetadataJson(metadata, v)
		got, gotErr := MetadataJSON(metadata, v)
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("MetadataJSON(%q) = %q, %v; KubeRay's %q, %v", v, got, gotErr, want, wantErr)
		}
	}
}

// TestConstantsAreKubeRays: the names this package exports are the
// operator's.
func TestConstantsAreKubeRays(t *testing.T) {
	pairs := [][2]string{
		{ClusterLabel, rayutils.RayClusterLabelKey}, {NodeTypeLabel, rayutils.RayNodeTypeLabelKey}, {GroupLabel, rayutils.RayNodeGroupLabelKey},
		{RayNodeLabel, rayutils.RayNodeLabelKey}, {IdentifierLabel, rayutils.RayIDLabelKey}, {ServeLabel, rayutils.RayClusterServingServiceLabelKey},
		{OriginatedFromCRLabel, rayutils.RayOriginatedFromCRNameLabelKey}, {OriginatedFromCRDLabel, rayutils.RayOriginatedFromCRDLabelKey},
		{GangSchedulingLabel, rayutils.RayGangSchedulingEnabled}, {AppNameLabel, rayutils.KubernetesApplicationNameLabelKey},
		{CreatedByLabel, rayutils.KubernetesCreatedByLabelKey}, {WorkerReplicaIndexKey, rayutils.RayWorkerReplicaIndexKey},
		{WorkerReplicaNameKey, rayutils.RayWorkerReplicaNameKey}, {HostIndexKey, rayutils.RayHostIndexKey},
		{JobClusterSelectorKey, rayutils.RayJobClusterSelectorKey}, {FTEnabledAnnotation, rayutils.RayFTEnabledAnnotationKey},
		{ExternalStorageNamespaceAnnotation, rayutils.RayExternalStorageNSAnnotationKey},
		{OverwriteContainerCmdAnnotation, rayutils.RayOverwriteContainerCmdAnnotationKey},
		{EnableServeServiceAnnotation, rayutils.EnableServeServiceKey},
		{DisableProvisionedHeadRestartAnnotation, rayutils.DisableProvisionedHeadRestartAnnotationKey},
		{IngressClassAnnotation, common.IngressClassAnnotationKey}, {SubmitterContainerName, rayutils.SubmitterContainerName},
		{AutoscalerContainerName, common.AutoscalerContainerName}, {DashboardPortName, rayutils.DashboardPortName},
		{ServingPortName, rayutils.ServingPortName}, {MetricsPortName, rayutils.MetricsPortName},
		{GeneratedStartCommandEnv, rayutils.KUBERAY_GEN_RAY_START_CMD}, {RedisAddressEnv, rayutils.RAY_REDIS_ADDRESS},
		{DashboardAddressEnv, rayutils.RAY_DASHBOARD_ADDRESS}, {JobSubmissionIDEnv, rayutils.RAY_JOB_SUBMISSION_ID},
		{OperatorVersion, rayutils.KUBERAY_VERSION}, {string(RayCluster), string(rayutils.RayClusterCRD)},
		{string(RayJob), string(rayutils.RayJobCRD)}, {string(RayService), string(rayutils.RayServiceCRD)},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("%q is %q in KubeRay", p[0], p[1])
		}
	}
}

// TestBuildsSomething guards the differential test against comparing
// nothing: the head pod runs the generated `ray start`, with GPUs from
// the limits.
func TestBuildsSomething(t *testing.T) {
	c := baseCluster()
	worker(&c).Resources = corev1.ResourceRequirements{Limits: quantities("nvidia.com/gpu", "2", "cpu", "4")}
	rc := c.rayCluster()
	g := rc.Spec.WorkerGroupSpecs[0]
	tmpl := WorkerPodTemplate(rc, g, "raycluster-gpu-worker", "raycluster-head-svc.ns.svc.cluster.local", "6379", "", 0, 0)
	pod := Pod(tmpl, rayv1.WorkerNode, g.RayStartParams, "6379", false, RayCluster, "raycluster-head-svc.ns.svc.cluster.local", nil, "2.54.0")
	b, _ := json.Marshal(pod.Spec.Containers[0].Args)
	for _, want := range []string{"ray start", "--num-gpus=2", "--num-cpus=4", "--address=raycluster-head-svc.ns.svc.cluster.local:6379", "--block"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the worker's command %s lacks %s", b, want)
		}
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != WaitGCSContainerName {
		t.Errorf("init containers %v, want the GCS wait", pod.Spec.InitContainers)
	}
}

// TestBuildsAgreeOnRealSpecs runs the comparison on clusters as people
// write them: every RayCluster, and every RayJob's and RayService's
// cluster, of KubeRay's own samples and of lint's users' corpus that the
// operator admits (a corpus document may be wrong on purpose).
func TestBuildsAgreeOnRealSpecs(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ray-project/kuberay/ray-operator").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	samples, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config", "samples", "*.yaml"))
	users, _ := filepath.Glob("../../manifest/validation/testdata/users/*.yaml")
	compared := map[string]int{} // by corpus
	corpusOf := map[string]string{}
	for _, f := range samples {
		corpusOf[f] = "KubeRay's samples"
	}
	for _, f := range users {
		corpusOf[f] = "lint's users' corpus"
	}
	for _, f := range slices.Concat(samples, users) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decoder := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for i := 0; ; i++ {
			var doc struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     json.RawMessage   `json:"spec"`
			}
			if err := decoder.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				break // the rest of a corpus file that is not YAML on purpose
			}
			c := cluster{name: doc.Metadata.Name, annotations: map[string]string{}}
			maps.Copy(c.annotations, doc.Metadata.Annotations)
			switch doc.Kind {
			case "RayCluster":
				if json.Unmarshal(doc.Spec, &c.spec) != nil {
					continue
				}
			case "RayJob":
				var job rayv1.RayJobSpec
				if json.Unmarshal(doc.Spec, &job) != nil || job.RayClusterSpec == nil {
					continue
				}
				c.spec = *job.RayClusterSpec
			case "RayService":
				if json.Unmarshal(doc.Spec, &c.service) != nil || c.service.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers == nil {
					continue
				}
				c.spec = *c.service.RayClusterSpec.DeepCopy()
			default:
				continue
			}
			if c.name == "" || len(c.name) > 50 {
				c.name = "cluster"
			}
			if !buildable(&c.spec, c.annotations) {
				continue
			}
			compared[corpusOf[f]]++
			compareBuilds(t, fmt.Sprintf("%s #%d (%s %s)", filepath.Base(f), i, doc.Kind, doc.Metadata.Name), c)
		}
	}
	for _, corpus := range []string{"KubeRay's samples", "lint's users' corpus"} {
		if compared[corpus] < 40 {
			t.Errorf("%d clusters of %s compared: the corpus was not read", compared[corpus], corpus)
		}
	}
	t.Logf("clusters compared: %v", compared)
}

// buildable gives a spec the defaults it has when the operator builds
// (SetDefaults), and tells whether the operator builds it at all: it
// admits it, and every group has a container.
func buildable(spec *rayv1.RayClusterSpec, annotations map[string]string) bool {
	SetDefaults(spec)
	for _, g := range spec.WorkerGroupSpecs {
		if len(g.Template.Spec.Containers) == 0 {
			return false
		}
	}
	return len(spec.HeadGroupSpec.Template.Spec.Containers) > 0 && rayutils.ValidateRayClusterSpec(spec, annotations) == nil
}
