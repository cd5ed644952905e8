// Package operator emulates the KubeRay operator (v1.6.0) for lint: the
// Ray-aware rules of package validation, which report what the API server
// and KubeRay's validation admit and the operator then refuses,
// mishandles or ignores, and the resources `ray start` will see.
//
// # Where things are
//
//   - rules.go: Rules, the entry point, one object at a time (ray.io
//     objects; Services and PodDisruptionBudgets in front of Ray pods); the
//     general Ray rules (versions, resources, exposure) are here too.
//   - clusterspec.go: rules read from a cluster spec (rayStartParams, group
//     names, images).
//   - builds.go: rules that build what the operator builds from the spec
//     (the head and serve Services, the Ingress, each group's pods, the
//     submitter Job) with package rayctl/operatorbuild, and judge it as
//     the API server would (APIServer, given by package validation).
//   - serveconfig.go: serveConfigV2 against Ray Serve's config schema.
//   - raystart.go: ComputeStartResources, the resources `ray start` sees,
//     read from the pods the operator builds.
//
// To add a rule: find where the operator's code reads the value (cite the
// file and function in the table below), write the rule where its kind
// of reading lives (a spec value: clusterspec.go; something the operator
// builds: builds.go), give it a stable id, an error when the object never
// runs as written and a warning when it runs otherwise than written, and
// a fix; add a document per rule to package validation's
// testdata/users/operator.yaml and show the operator doing it on the test
// control plane (TestOperatorMishandles), or hold it to the operator's or
// Ray's source where no Ray process runs.
//
// # What KubeRay admits and then mishandles
//
// Some mistakes pass the API server and KubeRay's own validation, and the
// operator then mishandles the object with at most a line in its log.
// clusterspec.go, builds.go and serveconfig.go find them, from a
// line-by-line reading of KubeRay v1.6.0's controllers (every switch and
// comparison over a spec value; every spec value that becomes a label, a
// name, a port or an env var of what it builds; every string it parses;
// every name it looks objects up by) and of Ray Serve's config schema.
// Where the operator builds an object from the spec (the head Service,
// the serve Service, each group's pod), lint builds it as the operator
// does (package rayctl/operatorbuild, a port of the operator's builders
// held to them by a differential test) and checks what is built as the
// API server will:
//
//	rule                     what goes wrong on a real cluster                   where the operator shows it
//	group-name-label         every worker pod refused (the group name is a       common/pod.go labelPod (ray.io/group);
//	  (error)                label value): the cluster runs with its head only    the API server's label validation
//	duplicate-group-name     two groups count the same pods (found by label):     common/association.go
//	  (error)                fewer workers than asked                              RayClusterGroupPodsAssociationOptions
//	head-service-refused     the head Service built from the spec is refused      common/service.go BuildServiceForHeadPod;
//	  (error)                (serviceType "Nodeport", a port on 8080 beside the   raycluster_controller.go reconcileHeadService,
//	                         metrics port, a bad headService name or label):       before reconcilePods
//	                         no pod at all
//	serve-port-missing       a serve Service asked for (annotation, RayService)    common/service.go BuildServeService
//	  (error)                and head ports without serve: no pod / never serves
//	operator-container-name  a container named as one the operator adds           common/pod.go DefaultWorkerPodTemplate
//	  (error)                (wait-gcs-ready, autoscaler, SidecarMode's             (wait-gcs-ready), BuildPod (autoscaler);
//	                         ray-job-submitter): every pod (the RayCluster)         rayjob_controller.go (SidecarMode)
//	                         refused
//	redis-credential (error) redisPassword/redisUsername with value and            common/pod.go DefaultHeadPodTemplate
//	                         valueFrom: the head pod refused, no cluster            (copied into one env var)
//	dashboard-port-missing   a RayJob's / RayService's head ports without          service.go getServicePorts;
//	  (error)                dashboard: the operator never reaches Ray, the job     utils FetchHeadServiceURL (rayjob_controller.go
//	                         never starts                                           Initializing, rayservice_controller.go)
//	num-of-hosts (error)     numOfHosts 0: the group gets no pods                  utils GetWorkerGroupDesiredReplicas
//	workers-to-delete-name   a name the API path refuses ("ns/name", ""): the      raycluster_controller.go reconcilePods
//	  (error)                delete fails at every reconcile, no workers           (FailedToDeleteWorkerPod, then return)
//	workers-to-delete-       not this group's pod: whatever pod has the name is    raycluster_controller.go reconcilePods
//	  foreign (warning)      deleted, at every reconcile
//	auth-mode-unset (error)  authOptions without mode: auth off, no token given    utils IsAuthEnabled (mode == token);
//	                                                                               reconcileAuthSecret (mode != disabled)
//	group-resource-quantity  a group resource that is no quantity is skipped:     common/pod.go updateRayStartParamsResources
//	  (error)                ray start never gets it
//	nested-upgrade-strategy  a RayJob's / RayService's cluster with                utils ValidateRayClusterUpgradeOptions
//	  (error)                upgradeStrategy.type: InvalidRayClusterSpec, no pod    (ray.io/originated-from-crd)
//	nested-cluster-suspended the owner's cluster suspended: never ready, the       rayjob_controller.go (waits for Ready)
//	  (error)                RayJob waits without end
//	submission-mode (error)  an unknown submissionMode: Running, never submitted   rayjob_controller.go Initializing branch
//	head-service-selects-    a head label the operator also sets, of another       common/pod.go DefaultHeadPodTemplate, labelPod
//	  nothing (error)        value (app.kubernetes.io/created-by,                  (the user's wins); service.go
//	                         ray.io/identifier; app.kubernetes.io/name but in      BuildServiceForHeadPod (the operator's),
//	                         the template, or for a RayJob's or RayService's       BuildHeadServiceFor{RayJob,RayService};
//	                         own head Service): the Service selects no pod          reconcileHeadService
//	ingress-refused (error)  enableIngress with an Ingress the API server          common/ingress.go BuildIngressForHeadService;
//	                         refuses (an ingress.class that is no name):           raycluster_controller.go reconcileIngress,
//	                         FailedToCreateIngress, no pod at all                   before the head Service
//	autoscaler-service-      with autoscaling, a head serviceAccountName the       common/pod.go DefaultHeadPodTemplate
//	  account (error)        operator rewrites (over 50 characters, a leading      (utils.CheckName)
//	                         digit): the head pod names another account, and is
//	                         refused
//	submitter-refused        K8sJobMode's submitter Job refused (its pods          rayjob_controller.go createNewK8sJob
//	  (error)                restarting Always, the default; a negative            (FailedToCreateRayJobSubmitter)
//	                         backoffLimit): the job is never submitted
//	submit-command (error)   metadata without a rayVersion of 2.6.0 or later:      common/job.go BuildJobSubmitCommand,
//	                         the submitter cannot be built, the RayJob stays        GetMetadataJson
//	                         Initializing (SidecarMode: no RayCluster)
//	entrypoint-resources     entrypointResources that are not a JSON object of     common/job.go BuildJobSubmitCommand (as
//	  (error)                quantities: ray job submit refuses them, the job       written); dashboardclient ConvertRayJobToReq
//	                         never runs                                             (HTTPMode)
//	entrypoint-missing       no entrypoint in K8sJobMode (the operator's command)  common/job.go BuildJobSubmitCommand
//	  (error)                or SidecarMode: `ray job submit --` with nothing
//	                         after it, refused
//	ray-start-param (error)  a rayStartParams value ray start refuses: the         common/pod.go convertParamMap
//	                         group's pods restart without end
//	serve-config (error)     serveConfigV2 not YAML, or refused by Ray Serve's     rayservice_controller.go
//	                         schema: the RayService never serves                   updateServeDeployment, the dashboard's PUT
//	serve-config (warning)   a key Ray Serve does not know: ignored                Ray Serve's schema.py
//	ray-container-first      `ray start` goes into containers[0], here not the     utils/constant.go RayContainerIndex = 0
//	  (warning)              Ray image
//	operator-env-overrides   an env var the operator sets after the user's         common/pod.go setContainerEnvVars;
//	  (warning)              (RAY_CLUSTER_NAME, RAY_IP, ...; the submitter's        rayjob_controller.go
//	                         RAY_DASHBOARD_ADDRESS, ...): the user's replaced       configureSubmitterContainer
//	annotation-bool          ray.io/ft-enabled, enable-serve-service, ... read     utils IsGCSFaultToleranceEnabled,
//	  (warning)              as false unless "true"                                 raycluster_controller.go, common/pod.go
//	autoscaler-options-      autoscalerOptions without enableInTreeAutoscaling:    common/pod.go (only when autoscaling)
//	  ignored (warning)      ignored
//	rayjob-field-ignored     rayClusterSpec beside clusterSelector, submitter      rayjob_controller.go
//	  (warning)              fields outside K8sJobMode: ignored
//	redis-address-missing    gcsFaultToleranceOptions with an empty redisAddress:  common/pod.go configureGCSFaultTolerance;
//	  (error)                the head gets an empty RAY_REDIS_ADDRESS, which       Ray's node.py (RAY_REDIS_ADDRESS split
//	                         Ray cannot parse: the head restarts without end        into host and port)
//	service-field-ignored    a headService's or serveService's selector, or a      common/service.go BuildServiceForHeadPod,
//	  (warning)              namespace not the object's: replaced                   BuildServeService
//	upgrade-strategy-gate    a RayService's NewClusterWithIncrementalUpgrade       rayservice_controller.go
//	  (warning)              without the operator's feature gate (off by           isZeroDowntimeUpgradeEnabled,
//	                         default): a changed cluster spec gets no new           shouldPrepareNewCluster
//	                         cluster
//	gang-scheduling-label    ray.io/gang-scheduling-enabled: "false": YuniKorn     batchscheduler/yunikorn, scheduler-plugins
//	  (warning)              and scheduler-plugins read it by presence, gang        isGangSchedulingEnabled
//	                         scheduling on
//	originated-from-crd-     a RayCluster labelled as made by a RayJob or          raycluster_controller.go getCreatorCRDType;
//	  label (warning)        RayService: its pods built as theirs (a head not      common/pod.go BuildPod (serve labels,
//	                         serving, workers ready only with Serve)                probes); utils ValidateRayClusterUpgradeOptions
//	fault-tolerance-ignored  ray.io/external-storage-namespace without fault       utils IsGCSFaultToleranceEnabled;
//	  (warning)              tolerance: ignored; ray.io/ft-enabled with no Redis    common/pod.go configureGCSFaultTolerance
//	                         address: set up, and the GCS state kept in memory
//
// The rules are held to the real operator by TestOperatorMishandles: a
// document of the users' corpus per rule, created on the test control
// plane as kubectl would, and what the operator then does (no pod, no
// worker, the event it records, the env it gives the head, no submitter
// where K8sJobMode gets one, a head Service that selects no pod; for the warnings, what they say happens on
// the test's cluster: a sidecar given ray start, the operator's env var
// last, no serve Service, no autoscaler, another workload's pod deleted,
// no RayCluster from an ignored rayClusterSpec). The rules that need a running Ray to show
// (kwok's pods run no containers) are held to their source: ray-start-param
// to the operator's own command construction
// (TestRayStartParamsReachRayStartVerbatim) and ray start's option types,
// redis-address-missing to the head's env the operator builds (shown on
// it) and Ray's node.py, which cannot split an empty address,
// entrypoint-resources and entrypoint-missing to the submitter Job the
// operator makes (shown on it) and its command
// (TestRayJobSubmitCommandVerbatim), which Ray's CLI refuses,
// upgrade-strategy-gate to KubeRay's feature gates
// (TestIncrementalUpgradeGateOffByDefault),
// gang-scheduling-label to KubeRay's YuniKorn scheduler code
// (TestGangSchedulingLabelByPresence: no batch scheduler runs in the test
// control plane), service-field-ignored for the serve Service to
// BuildServeService (TestServiceFieldsTheOperatorReplaces: the RayService
// controller builds it only once Ray serves),
// the Serve rules to Ray Serve's schema (TestServeConfigHeldToRayServeSchema);
// every KubeRay sample passes them all. Warnings that KubeRay copes with stay
// warnings (a RayJob without cleanup, replicas outside [min, max], rayVersion
// and the image's Ray, ...).
//
// Switches over spec values that are not rules, because the CRD's enum,
// its CEL rules or KubeRay's validation refuse the values they do not
// handle: upgradeStrategy.type (RayCluster, RayService), authOptions.mode,
// autoscalerOptions.version and upscalingMode, deletionStrategy policies
// and deletionRules, managedBy, submissionMode against clusterSelector and
// the submitter fields, restartPolicy with autoscaler v2 and SidecarMode,
// the GCS fault tolerance options against their env vars and annotations,
// the RayService initializing-timeout annotation. Looked at and found
// handled: autoscalerOptions.env (appended after the operator's, so the
// user's wins), a head template's metadata.name (the head pod takes it
// unless the operator names head pods itself),
// the probes rayVersion picks (ray-version-image warns when rayVersion is
// not the image's Ray). No spec value becomes an env var name: the
// operator's env var names are all its own constants.
package operator
