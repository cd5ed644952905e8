// Package operatorbuild builds what the KubeRay operator (v1.6.0) builds
// from a RayCluster, RayJob or RayService: the head and worker pods with
// their `ray start` command, the head and serve Services, the dashboard
// Ingress and a RayJob's submitter template. Lint judges these objects as
// the API server will judge them when the operator creates them (package
// manifest/validation/operator).
//
// It is a port of the operator's builders (controllers/ray/common and the
// helpers of controllers/ray/utils it calls), held to them by a
// differential test that runs both on every case of a table of specs and
// compares what they build. The operator's own packages are not linked in
// binaries: through its feature gates they link the testing package.
//
// The operator reads a few settings from its own environment
// (ENABLE_INIT_CONTAINER_INJECTION, ENABLE_PROBES_INJECTION,
// ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE, ENABLE_DETERMINISTIC_HEAD_POD_NAME,
// ENABLE_LOGIN_SHELL) and from its feature gates; this package builds as
// an operator deployed with its defaults does: an init container that
// waits for the GCS, probes, a headless head Service, generated head pod
// names, `bash -c`, RayMultiHostIndexing on and
// RayServiceIncrementalUpgrade off. Unlike the operator's, its functions
// never print (the operator's name checks print what they cut).
//
// Like the operator's, the builders share maps and slices with their
// arguments and may change them (a group's rayStartParams gain the
// defaults `ray start` is given): pass copies of what must stay as it is,
// given SetDefaults first, as the operator gives its specs.
package operatorbuild
