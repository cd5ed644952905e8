package operatorbuild

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"
)

// HeadPodTemplate is the template the operator makes of a cluster's head
// group (common/pod.go DefaultHeadPodTemplate): its labels, the
// autoscaler container, fault tolerance's env vars, the metrics port and
// token authentication. head.RayStartParams must not be nil; it gains
// the head's defaults (dashboard-host, metrics-export-port, block…), and
// Pod then takes it.
func HeadPodTemplate(cluster rayv1.RayCluster, head rayv1.HeadGroupSpec, podName, headPort string) corev1.PodTemplateSpec {
	tmpl := head.Template
	tmpl.GenerateName = podName
	tmpl.Namespace = cluster.Namespace
	groupResourcesToParams(head.RayStartParams, head.Resources)
	groupLabelsToParams(head.RayStartParams, head.Labels)
	tmpl.Labels = podLabels(rayv1.HeadNode, cluster.Name, headGroupValue, mergeLabels(head.Template.Labels, head.Labels))
	head.RayStartParams = missingStartParams(head.RayStartParams, rayv1.HeadNode, headPort, "")
	overwriteAnnotation(cluster, &tmpl)

	if autoscalingOn(&cluster.Spec) {
		head.RayStartParams["no-monitor"] = "true"
		account := cluster.Spec.HeadGroupSpec.Template.Spec.ServiceAccountName
		if account == "" {
			account = cluster.Name
		}
		tmpl.Spec.ServiceAccountName = CheckedName(account)
		autoscaler := autoscalerContainer(tmpl.Spec.Containers[0].Image)
		if AuthOn(&cluster.Spec) {
			SetTokenAuthEnv(cluster.Name, &autoscaler, cluster.Spec.AuthOptions)
		}
		mergeAutoscalerOptions(&autoscaler, cluster.Spec.AutoscalerOptions)
		tmpl.Spec.Containers = append(tmpl.Spec.Containers, autoscaler)
		if autoscalerV2On(&cluster.Spec) {
			tmpl.Spec.Containers[0].Env = append(tmpl.Spec.Containers[0].Env, corev1.EnvVar{Name: autoscalerV2Env, Value: "true"})
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		}
	}
	gcsFaultTolerance(&tmpl, cluster, rayv1.HeadNode)
	addMetricsPort(&tmpl.Spec.Containers[0])
	if AuthOn(&cluster.Spec) {
		tokenAuth(cluster.Name, &tmpl, cluster.Spec.AuthOptions)
	}
	return tmpl
}

// WorkerPodTemplate is the template the operator makes of a worker group
// (common/pod.go DefaultWorkerPodTemplate): the init container that waits
// for the GCS, the labels (with the replica's indexes), fault
// tolerance's env vars, the metrics port and token authentication.
// group.RayStartParams must not be nil; it gains the worker's defaults
// (the head's address among them), and Pod then takes it.
func WorkerPodTemplate(cluster rayv1.RayCluster, group rayv1.WorkerGroupSpec, podName, headFQDN, headPort, replicaName string, replicaIndex, hostIndex int) corev1.PodTemplateSpec {
	tmpl := group.Template
	tmpl.GenerateName = podName
	tmpl.Namespace = cluster.Namespace

	ray := tmpl.Spec.Containers[0].DeepCopy()
	wait := corev1.Container{
		Name:            WaitGCSContainerName,
		Image:           tmpl.Spec.Containers[0].Image,
		ImagePullPolicy: tmpl.Spec.Containers[0].ImagePullPolicy,
		Command:         containerCommand(),
		Args:            []string{fmt.Sprintf(waitForGCSScript, headFQDN, headPort, headFQDN, headPort)},
		SecurityContext: tmpl.Spec.Containers[0].SecurityContext.DeepCopy(),
		Env:             ray.Env,
		VolumeMounts:    ray.VolumeMounts,
		Resources:       fixedResources("200m", "256Mi", "200m", "256Mi"),
	}
	tmpl.Spec.InitContainers = append(tmpl.Spec.InitContainers, wait)
	tmpl.Name = ""

	groupResourcesToParams(group.RayStartParams, group.Resources)
	groupLabelsToParams(group.RayStartParams, group.Labels)
	tmpl.Labels = podLabels(rayv1.WorkerNode, cluster.Name, group.GroupName, mergeLabels(group.Template.Labels, group.Labels))
	tmpl.Labels[WorkerReplicaIndexKey] = strconv.Itoa(replicaIndex)
	if group.NumOfHosts > 1 {
		tmpl.Labels[WorkerReplicaNameKey] = replicaName
		tmpl.Labels[HostIndexKey] = strconv.Itoa(hostIndex)
	}
	group.RayStartParams = missingStartParams(group.RayStartParams, rayv1.WorkerNode, headPort, headFQDN)
	overwriteAnnotation(cluster, &tmpl)
	gcsFaultTolerance(&tmpl, cluster, rayv1.WorkerNode)
	addMetricsPort(&tmpl.Spec.Containers[0])
	if autoscalingOn(&cluster.Spec) && autoscalerV2On(&cluster.Spec) {
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if AuthOn(&cluster.Spec) {
		tokenAuth(cluster.Name, &tmpl, cluster.Spec.AuthOptions)
	}
	return tmpl
}

// waitForGCSScript is the init container's script; its arguments are
// the head's name and port, twice.
const waitForGCSScript = `
					SECONDS=0
					while true; do
						if (( SECONDS <= 120 )); then
							if ray health-check --address %s:%s > /dev/null 2>&1; then
								echo "GCS is ready."
								break
							fi
							echo "$SECONDS seconds elapsed: Waiting for GCS to be ready."
						else
							if ray health-check --address %s:%s; then
								echo "GCS is ready. Any error messages above can be safely ignored."
								break
							fi
							echo "$SECONDS seconds elapsed: Still waiting for GCS to be ready. For troubleshooting, refer to the FAQ at https://docs.ray.io/en/master/cluster/kubernetes/troubleshooting.html."
						fi
						sleep 5
					done
				`

func fixedResources(cpuLimit, memoryLimit, cpuRequest, memoryRequest string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLimit), corev1.ResourceMemory: resource.MustParse(memoryLimit)},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuRequest), corev1.ResourceMemory: resource.MustParse(memoryRequest)},
	}
}

func overwriteAnnotation(cluster rayv1.RayCluster, tmpl *corev1.PodTemplateSpec) {
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	if v, ok := cluster.Annotations[OverwriteContainerCmdAnnotation]; ok && strings.ToLower(v) == "true" {
		tmpl.Annotations[OverwriteContainerCmdAnnotation] = "true"
	}
}

func addMetricsPort(c *corev1.Container) {
	if containerPort(c, MetricsPortName, -1) == -1 {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: MetricsPortName, ContainerPort: defaultMetricsPort})
	}
}

// gcsFaultTolerance gives the pods of a fault-tolerant cluster what the
// operator gives them (common/pod.go configureGCSFaultTolerance); like
// the operator's, it changes the head's rayStartParams of cluster.
func gcsFaultTolerance(tmpl *corev1.PodTemplateSpec, cluster rayv1.RayCluster, nodeType rayv1.RayNodeType) {
	on := GCSFaultToleranceOn(&cluster.Spec, cluster.Annotations)
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	if nodeType == rayv1.HeadNode {
		tmpl.Annotations[FTEnabledAnnotation] = strconv.FormatBool(on)
	}
	if !on {
		return
	}
	options := cluster.Spec.GcsFaultToleranceOptions
	c := &tmpl.Spec.Containers[0]
	if nodeType == rayv1.WorkerNode && !envExists(gcsReconnectTimeoutEnv, c.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: gcsReconnectTimeoutEnv, Value: workerGCSReconnectAfter})
	}
	if nodeType != rayv1.HeadNode {
		return
	}
	namespace := string(cluster.UID)
	if v, ok := cluster.Annotations[ExternalStorageNamespaceAnnotation]; ok {
		namespace = v
	}
	if options != nil && options.ExternalStorageNamespace != "" {
		namespace = options.ExternalStorageNamespace
	}
	tmpl.Annotations[ExternalStorageNamespaceAnnotation] = namespace
	if !envExists(externalStorageNSEnv, c.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: externalStorageNSEnv, Value: namespace})
	}
	if options == nil {
		// A redis-password in rayStartParams is given to the Redis
		// cleanup job through REDIS_PASSWORD.
		if !envExists(redisPasswordEnv, c.Env) {
			if v, ok := cluster.Spec.HeadGroupSpec.RayStartParams["redis-password"]; ok {
				c.Env = append(c.Env, corev1.EnvVar{Name: redisPasswordEnv, Value: v})
			}
		}
		return
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: RedisAddressEnv, Value: options.RedisAddress})
	if u := options.RedisUsername; u != nil {
		cluster.Spec.HeadGroupSpec.RayStartParams["redis-username"] = "$REDIS_USERNAME"
		c.Env = append(c.Env, corev1.EnvVar{Name: redisUsernameEnv, Value: u.Value, ValueFrom: u.ValueFrom})
	}
	if p := options.RedisPassword; p != nil {
		cluster.Spec.HeadGroupSpec.RayStartParams["redis-password"] = "$REDIS_PASSWORD"
		c.Env = append(c.Env, corev1.EnvVar{Name: redisPasswordEnv, Value: p.Value, ValueFrom: p.ValueFrom})
	}
}

// tokenAuth gives the Ray container, and the init container that waits
// for the GCS, the token the cluster's Ray asks for.
func tokenAuth(cluster string, tmpl *corev1.PodTemplateSpec, options *rayv1.AuthOptions) {
	SetTokenAuthEnv(cluster, &tmpl.Spec.Containers[0], options)
	if k8sAuthOn(options) && !slices.ContainsFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == tokenVolumeName }) {
		tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
			Name: tokenVolumeName,
			VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
			}},
		})
	}
	for i := range tmpl.Spec.InitContainers {
		if tmpl.Spec.InitContainers[i].Name == WaitGCSContainerName {
			SetTokenAuthEnv(cluster, &tmpl.Spec.InitContainers[i], options)
		}
	}
}

// SetTokenAuthEnv gives a container what the operator gives it when the
// cluster runs with token authentication (common/pod.go
// SetContainerTokenAuthEnvVars): RAY_AUTH_MODE, and the token from the
// cluster's Secret or, with Kubernetes tokens, the projected account
// token. What the container already sets stays.
func SetTokenAuthEnv(cluster string, c *corev1.Container, options *rayv1.AuthOptions) {
	if !envExists(authModeEnv, c.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: authModeEnv, Value: string(rayv1.AuthModeToken)})
	}
	if k8sAuthOn(options) {
		if !envExists(k8sTokenAuthEnv, c.Env) {
			c.Env = append(c.Env, corev1.EnvVar{Name: k8sTokenAuthEnv, Value: "true"})
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tokenVolumeName }) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tokenVolumeName, MountPath: tokenMountPath, ReadOnly: true})
		}
		return
	}
	secret := CheckedName(cluster)
	if options != nil && options.SecretName != nil && *options.SecretName != "" {
		secret = *options.SecretName
	}
	if !envExists(authTokenEnv, c.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: authTokenEnv, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: authTokenSecretKey},
		}})
	}
}

func autoscalerContainer(image string) corev1.Container {
	return corev1.Container{
		Name:            AutoscalerContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{
			{Name: clusterNameEnv, ValueFrom: fieldRef(fmt.Sprintf("metadata.labels['%s']", ClusterLabel))},
			{Name: clusterNamespaceEnv, ValueFrom: fieldRef("metadata.namespace")},
			{Name: "RAY_HEAD_POD_NAME", ValueFrom: fieldRef("metadata.name")},
			{Name: "KUBERAY_CRD_VER", Value: "v1"},
		},
		Command:   containerCommand(),
		Args:      []string{"ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"},
		Resources: fixedResources("500m", "512Mi", "500m", "512Mi"),
	}
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

func mergeAutoscalerOptions(c *corev1.Container, o *rayv1.AutoscalerOptions) {
	if o == nil {
		return
	}
	if o.Resources != nil {
		c.Resources = *o.Resources
	}
	if o.Image != nil {
		c.Image = *o.Image
	}
	if o.ImagePullPolicy != nil {
		c.ImagePullPolicy = *o.ImagePullPolicy
	}
	c.Env = append(c.Env, o.Env...)
	c.EnvFrom = append(c.EnvFrom, o.EnvFrom...)
	c.VolumeMounts = append(c.VolumeMounts, o.VolumeMounts...)
	if o.SecurityContext != nil {
		c.SecurityContext = o.SecurityContext.DeepCopy()
	}
}

// Pod is the pod the operator creates from a group's template (common/pod.go
// BuildPod): the object store's /dev/shm, the autoscaler's log volume,
// the `ray start` command (unless the container runs its own), the
// operator's env vars and the probes. params are the group's
// rayStartParams as the template's function left them; defaultEnv are
// env vars the operator is configured to add.
func Pod(tmpl corev1.PodTemplateSpec, nodeType rayv1.RayNodeType, params map[string]string, headPort string, autoscaling bool, creator CRD, headFQDN string, defaultEnv []corev1.EnvVar, rayVersion string) corev1.Pod {
	if creator == RayService {
		tmpl.Labels[ServeLabel] = "true"
		if nodeType == rayv1.HeadNode {
			tmpl.Labels[ServeLabel] = "false"
		}
	}
	pod := corev1.Pod{TypeMeta: typeMeta("v1", "Pod"), ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	ray := &pod.Spec.Containers[0]
	if _, ok := params[plasmaDirectoryKey]; !ok {
		addEmptyDir(ray, &pod, sharedMemoryVolume, sharedMemoryPath, corev1.StorageMediumMemory)
	}
	if nodeType == rayv1.HeadNode && autoscaling {
		i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == AutoscalerContainerName })
		addEmptyDir(ray, &pod, logVolume, logPath, corev1.StorageMediumDefault)
		addEmptyDir(&pod.Spec.Containers[i], &pod, logVolume, logPath, corev1.StorageMediumDefault)
	}

	var cmd string
	if len(ray.Command) > 0 {
		cmd = commandString(ray.Command)
	}
	if len(ray.Args) > 0 {
		cmd += commandString(ray.Args)
	}
	start := startCommand(nodeType, params, ray.Resources)
	overwrite := false
	if v, ok := tmpl.Annotations[OverwriteContainerCmdAnnotation]; ok {
		overwrite = strings.ToLower(v) == "true"
	}
	if !overwrite && !strings.Contains(cmd, "ray start") {
		generated := "ulimit -n 65536; " + start
		ray.Command = containerCommand()
		args := generated
		if cmd != "" {
			args = cmd + " && " + generated
		}
		ray.Args = []string{args}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if len(c.Env) == 0 {
			c.Env = []corev1.EnvVar{}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: fqRayIPEnv, Value: headFQDN}, corev1.EnvVar{Name: rayIPEnv, Value: rayIPOf(headFQDN)})
	}
	containerEnv(&pod, nodeType, headFQDN, headPort, start, creator, defaultEnv)
	probes(&pod.Spec.Containers[0], nodeType, creator, params, rayVersion)
	return pod
}

// commandString is how the operator joins a command to look for `ray
// start` in it and to run it before its own: each word between spaces.
func commandString(words []string) string {
	var b strings.Builder
	for _, w := range words {
		b.WriteString(" " + w + " ")
	}
	return b.String()
}

func addEmptyDir(c *corev1.Container, pod *corev1.Pod, name, path string, medium corev1.StorageMedium) {
	if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path }) {
		return
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
		var limit *resource.Quantity
		if medium == corev1.StorageMediumMemory {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				limit = &q
			} else if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
				limit = &q
			}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium, SizeLimit: limit},
		}})
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{MountPath: path, Name: name})
}

// containerEnv sets the env vars the operator gives the Ray container
// (common/pod.go setContainerEnvVars).
func containerEnv(pod *corev1.Pod, nodeType rayv1.RayNodeType, headFQDN, headPort, start string, creator CRD, defaultEnv []corev1.EnvVar) {
	c := &pod.Spec.Containers[0]
	if len(c.Env) == 0 {
		c.Env = []corev1.EnvVar{}
	}
	for _, e := range defaultEnv {
		if !envExists(e.Name, c.Env) {
			c.Env = append(c.Env, e)
		}
	}
	ip := localHost
	if nodeType == rayv1.WorkerNode {
		ip = headFQDN
		c.Env = append(c.Env, corev1.EnvVar{Name: fqRayIPEnv, Value: ip}, corev1.EnvVar{Name: rayIPEnv, Value: rayIPOf(ip)})
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: clusterNameEnv, ValueFrom: fieldRef(fmt.Sprintf("metadata.labels['%s']", ClusterLabel))},
		corev1.EnvVar{Name: clusterNamespaceEnv, ValueFrom: fieldRef("metadata.namespace")},
		corev1.EnvVar{Name: cloudInstanceIDEnv, ValueFrom: fieldRef("metadata.name")},
		corev1.EnvVar{Name: nodeTypeNameEnv, ValueFrom: fieldRef(fmt.Sprintf("metadata.labels['%s']", GroupLabel))},
		corev1.EnvVar{Name: GeneratedStartCommandEnv, Value: start},
	)
	setUnlessSet := func(name, value string) {
		if !envExists(name, c.Env) {
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	setUnlessSet(rayPortEnv, headPort)
	if creator == RayService {
		setUnlessSet(taskDeathInfoEnv, "0")
		setUnlessSet(gcsRequestTimeoutEnv, "5")
		setUnlessSet(serveKVTimeoutEnv, "5")
	}
	setUnlessSet(rayAddressEnv, ip+":"+headPort)
	setUnlessSet(usageStatsInUseEnv, "1")
	if nodeType == rayv1.HeadNode {
		c.Env = append(c.Env, corev1.EnvVar{Name: usageStatsExtraTagsEnv, Value: fmt.Sprintf("kuberay_version=%s;kuberay_crd=%s", OperatorVersion, creator)})
	}
	setUnlessSet(dashboardDiskUsageEnv, "1")
}

// missingStartParams adds the rayStartParams the operator always gives:
// the head's address (workers), dashboard-host (head), the metrics and
// dashboard agent ports, and --block.
func missingStartParams(params map[string]string, nodeType rayv1.RayNodeType, headPort, headFQDN string) map[string]string {
	setUnlessSet := func(k, v string) {
		if _, ok := params[k]; !ok {
			params[k] = v
		}
	}
	switch nodeType {
	case rayv1.WorkerNode:
		setUnlessSet("address", headFQDN+":"+headPort)
	case rayv1.HeadNode:
		setUnlessSet("dashboard-host", "0.0.0.0")
	}
	setUnlessSet("metrics-export-port", strconv.Itoa(defaultMetricsPort))
	params["block"] = "true"
	setUnlessSet("dashboard-agent-listen-port", strconv.Itoa(defaultDashboardAgentPort))
	return params
}

// startCommand is the `ray start` command the operator generates
// (common/pod.go generateRayStartCommand): CPUs from the limit (else the
// request), memory from the limit, GPUs and one accelerator from the
// limits, unless rayStartParams give them.
func startCommand(nodeType rayv1.RayNodeType, params map[string]string, res corev1.ResourceRequirements) string {
	if _, ok := params["num-cpus"]; !ok {
		if cpu := res.Limits[corev1.ResourceCPU]; !cpu.IsZero() {
			params["num-cpus"] = strconv.FormatInt(cpu.Value(), 10)
		} else if cpu := res.Requests[corev1.ResourceCPU]; !cpu.IsZero() {
			params["num-cpus"] = strconv.FormatInt(cpu.Value(), 10)
		}
	}
	if _, ok := params["memory"]; !ok {
		if memory := res.Limits[corev1.ResourceMemory]; !memory.IsZero() {
			params["memory"] = strconv.FormatInt(memory.Value(), 10)
		}
	}
	acceleratorParams(params, res.Limits) // on a malformed resources param the operator logs and goes on
	switch nodeType {
	case rayv1.HeadNode:
		return "ray start --head " + paramFlags(params)
	case rayv1.WorkerNode:
		return "ray start " + paramFlags(params)
	}
	return ""
}

// acceleratorParams gives `ray start` the GPUs of the limits (num-gpus)
// and the first accelerator Ray knows by its own name (resources).
func acceleratorParams(params map[string]string, limits corev1.ResourceList) error {
	if len(limits) == 0 {
		return nil
	}
	resources := map[string]float64{}
	if s, ok := params["resources"]; ok {
		if err := json.Unmarshal([]byte(strings.Trim(s, "'\"` ")), &resources); err != nil {
			return fmt.Errorf("rayStartParams resources: %w", err)
		}
	}
	added := false
	for _, name := range acceleratorRayResources {
		if _, ok := resources[name]; ok {
			added = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		q := limits[name]
		if _, ok := params["num-gpus"]; !ok && gpuResource(string(name)) && !q.IsZero() {
			params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
		}
		if rayName, ok := acceleratorRayResources[string(name)]; !added && ok && !q.IsZero() {
			if _, exists := resources[rayName]; !exists {
				resources[rayName] = q.AsApproximateFloat64()
				b, err := json.Marshal(resources)
				if err != nil {
					return err
				}
				params["resources"] = "'" + string(b) + "'"
			}
			added = true
		}
	}
	return nil
}

// paramFlags writes rayStartParams as flags, sorted: "true" alone as a
// switch, "false" left out (but for log-color and include-dashboard,
// which take the word).
func paramFlags(params map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		lower := strings.ToLower(v)
		if (lower == "true" || lower == "false") && k != "log-color" && k != "include-dashboard" {
			if lower == "true" {
				fmt.Fprintf(&b, " --%s ", k)
			}
			continue
		}
		fmt.Fprintf(&b, " --%s=%s ", k, v)
	}
	return b.String()
}

// probes gives the Ray container the operator's liveness and readiness
// probes where it has none: an HTTP health check from Ray 2.53, wget of
// the raylet's (and the head's GCS's) health before; a RayService's
// workers are ready only once Serve's proxy answers.
func probes(c *corev1.Container, nodeType rayv1.RayNodeType, creator CRD, params map[string]string, rayVersion string) {
	port := func(key string, fallback int32) int32 {
		if s, ok := params[key]; ok {
			if p, err := strconv.ParseInt(s, 10, 32); err == nil {
				return int32(p)
			}
		}
		return fallback
	}
	agentPort := port("dashboard-agent-listen-port", defaultDashboardAgentPort)
	httpCheck := false
	if v, err := version.ParseGeneric(rayVersion); err == nil {
		httpCheck = v.AtLeast(version.MustParseGeneric("2.53.0"))
	}
	// (The wget timeouts are the operator's, odd as they are.)
	commands := []string{fmt.Sprintf(wgetHealthCommand, readinessTiming.timeout, agentPort, rayletHealthPath)}
	if nodeType == rayv1.HeadNode {
		commands = append(commands, fmt.Sprintf(wgetHealthCommand, readinessTiming.failures, port("dashboard-port", defaultDashboardPort), gcsHealthPath))
	}
	probe := func(t probeTiming) *corev1.Probe {
		p := &corev1.Probe{InitialDelaySeconds: t.delay, TimeoutSeconds: t.timeout, PeriodSeconds: t.period,
			SuccessThreshold: t.successes, FailureThreshold: t.failures}
		if nodeType == rayv1.HeadNode {
			p.TimeoutSeconds = t.headTimeout
		}
		if httpCheck {
			p.HTTPGet = &corev1.HTTPGetAction{Path: nodeHealthPath, Port: intstr.FromInt32(agentPort)}
		} else {
			p.Exec = &corev1.ExecAction{Command: []string{"bash", "-c", strings.Join(commands, " && ")}}
		}
		return p
	}
	if c.LivenessProbe == nil {
		c.LivenessProbe = probe(livenessTiming)
	}
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = probe(readinessTiming)
		if creator == RayService && nodeType == rayv1.WorkerNode {
			c.ReadinessProbe.FailureThreshold = serveReadinessFailure
			commands = append(commands, fmt.Sprintf(wgetHealthCommand, readinessTiming.delay, containerPort(c, ServingPortName, defaultServingPort), serveProxyHealthPath))
			c.ReadinessProbe.HTTPGet = nil
			c.ReadinessProbe.Exec = &corev1.ExecAction{Command: []string{"bash", "-c", strings.Join(commands, " && ")}}
		}
	}
}

// podLabels are the labels of a pod of a group: the operator's, then the
// user's (but for the cluster, node type and group, which stay the
// operator's).
func podLabels(nodeType rayv1.RayNodeType, cluster, group string, user map[string]string) map[string]string {
	labels := map[string]string{
		RayNodeLabel:    "yes",
		ClusterLabel:    cluster,
		NodeTypeLabel:   string(nodeType),
		GroupLabel:      group,
		IdentifierLabel: identifier(cluster, nodeType),
		AppNameLabel:    appName,
		CreatedByLabel:  componentName,
	}
	for k, v := range user {
		if k != NodeTypeLabel && k != GroupLabel && k != ClusterLabel {
			labels[k] = v
		}
	}
	return labels
}

func mergeLabels(template, group map[string]string) map[string]string {
	merged := map[string]string{}
	maps.Copy(merged, template)
	maps.Copy(merged, group)
	return merged
}

// groupLabelsToParams gives `ray start` the group's labels (--labels).
func groupLabelsToParams(params, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	params["labels"] = strings.Join(pairs, ",")
}

// groupResourcesToParams gives `ray start` the group's resources: CPU,
// memory and GPUs as their flags, the rest as --resources; a value that
// is no quantity is skipped.
func groupResourcesToParams(params, resources map[string]string) {
	if len(resources) == 0 {
		return
	}
	custom := map[string]float64{}
	for name, s := range resources {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			continue
		}
		switch lower := strings.ToLower(name); {
		case lower == string(corev1.ResourceCPU):
			params["num-cpus"] = strconv.FormatInt(q.Value(), 10)
		case lower == string(corev1.ResourceMemory):
			params["memory"] = strconv.FormatInt(q.Value(), 10)
		case gpuResource(lower):
			params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
		default:
			custom[name] = q.AsApproximateFloat64()
		}
	}
	if len(custom) > 0 {
		b, err := json.Marshal(custom)
		if err != nil {
			return
		}
		params["resources"] = "'" + string(b) + "'"
	}
}
