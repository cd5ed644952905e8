// Package validation validates Kubernetes objects in process with the API
// server's semantics, runs KubeRay's own validation on ray.io objects as the
// operator reads them, lints them for Ray-specific mistakes, and computes the
// resources KubeRay passes to `ray start`. It is pure: it never talks to a
// cluster.
//
// # Pieces
//
//   - validate.go: the Validator. ray.io objects go the way the API server
//     takes a create, step for step, through k8s.io/apiextensions-apiserver
//     with KubeRay's CRDs (crds/, embedded at the pinned version; the
//     Gateway API's standard CRDs are embedded the same way): decoding
//     (pruning of unknown fields, then of the nulls the schema allows
//     nowhere and defaults nowhere — a key written with no value, `env:`,
//     is dropped), defaulting, the request's namespace, the strategy's
//     PrepareForCreate (the status dropped, generation 1) and validation —
//     the CRD schema, embedded metadata, list types, CEL rules. Then KubeRay's
//     own validation functions run on the object as the operator would read
//     it (as stored). Built-ins — every object kind of client-go's scheme,
//     with the API server's scope (builtinkinds.go) — are decoded strictly
//     into their Go types — where a null leaves the field's zero value, as
//     in the API server — and checked as the API server checks them
//     (builtinchecks.go).
//   - apiversions.go: API versions judged for a target Kubernetes release
//     (TargetKubernetes): removed ones are errors naming the release and
//     the replacement, deprecated ones warnings, from the types' own
//     lifecycle records.
//   - podtemplates.go: the pod-spec checks the API server makes when a pod
//     is created, run on every pod template of any kind (for ray.io kinds
//     they would otherwise only surface when the operator creates the
//     pods).
//   - lint.go, findings.go, kuberayrules.go, raystart.go: reading users'
//     YAML, findings, the Ray-aware rules, and the resources `ray start`
//     will see.
//
// # Fast paths
//
// The library walks follow the schema and copy a schema node per property,
// which made a large RayService take 0.2 ms. schemacheck.go,
// structuralplan.go and typeddecode.go walk the object instead: a compiled
// OpenAPI check that answers only "certainly valid" (comparing integers
// with bounds the way kube-openapi does, truncated to integers), a
// structural plan that decides pruning exactly, drops nulls and applies
// defaults copying only the nodes they change and confirms list-type
// invariants, and a key-driven typed decode.
// Each leaves anything
// it does not mirror to the library, which decides and words the errors.
// Differential tests over tens of thousands of mutations of the golden
// ray.io objects and of the valid Gateway API objects of the users' corpus
// (schemacheck_test.go) hold every fast path to the library.
//
// # A fresh process
//
// Users run lint as a fresh process, from an editor, a pre-commit hook or
// CI, so what a Validator loads before its first answer matters as much as
// the steady state. precompiled/ holds, per embedded CRD (written by
// `go generate`, held to crds/ by TestPrecompiledMatchesCRDs): the fast
// paths in a compact codec of their own (precompiled.go; identical subtrees
// stored once), which a valid object needs alone, and each version's
// schema in apiextensions' internal form without descriptions
// (library.go), from which the library's parts — structural schema, schema
// validator, CEL validator — are built one by one, only when an object
// needs them. A first RayCluster is validated in under a millisecond
// (BenchmarkValidateCold); parsing the verbatim CRD took a hundred.
//
// # What KubeRay admits and then mishandles
//
// Some mistakes pass the API server and KubeRay's own validation, and the
// operator then mishandles the object with at most a line in its log.
// operatorrules.go and serveconfig.go find them, from a reading of
// KubeRay v1.6.0's controllers (every spec value that becomes a label, a
// name or an env var of the pods it builds; every string it parses; every
// name it looks objects up by) and of Ray Serve's config schema:
//
//	rule                  what goes wrong on a real cluster                            where the operator shows it
//	group-name-label      every worker pod refused (group name is a label value):    common/pod.go labelPod (ray.io/group);
//	  (error)             the cluster runs with its head only                          the API server's label validation
//	duplicate-group-name  two groups count the same pods (found by label): fewer      common/association.go
//	  (error)             workers than asked, scale-down deletes either group's pods   RayClusterGroupPodsAssociationOptions;
//	                                                                                   raycluster_controller.go reconcilePods
//	ray-container-first   `ray start` goes into containers[0], here not the Ray      utils/constant.go RayContainerIndex = 0;
//	  (warning)           image: the node starts in the wrong image                    common/pod.go BuildPod
//	ray-start-param       a rayStartParams value ray start refuses (a word for a     common/pod.go convertParamMap (the value
//	  (error)             number, resources that are not JSON after the shell):       goes verbatim into the shell command);
//	                      the group's pods restart without end                        ray start's option types
//	serve-config (error)  serveConfigV2 not YAML, or refused by Ray Serve's schema:   rayservice_controller.go
//	                      the RayService never serves; retried at every reconcile      updateServeDeployment (yaml.Unmarshal),
//	                                                                                   then the dashboard's PUT
//	serve-config          a key Ray Serve does not know: ignored, the setting has     Ray Serve's schema.py (pydantic ignores
//	  (warning)           no effect                                                    unknown keys but in logging_config)
//
// The error rules are held to the real operator by TestOperatorMishandles
// (a document of the users' corpus per rule, created on the test control
// plane: no worker pod ever exists; fewer workers than asked); the rules
// that need a running Ray to show (kwok's pods run no containers) to their
// source: ray-start-param to the operator's own command construction
// (TestRayStartParamsReachRayStartVerbatim) and ray start's option types,
// the Serve rules to Ray Serve's schema (TestServeConfigHeldToRayServeSchema);
// every KubeRay sample passes them all. Warnings that KubeRay copes with stay warnings
// (a RayJob without cleanup, replicas outside [min, max], rayVersion and
// the image's Ray, ...).
//
// # Held to the real systems
//
// testdata/users holds YAML written the way people write it, one mistake
// per document or none. TestLintAgreesWithTheRealSystems sends each to a
// real API server (dry run, strict field validation) and each admitted
// ray.io object to the real KubeRay operator: lint must report an error
// exactly when one of them refuses, naming the fields the server names.
// TestLintAgreesOnKubeRaySamples does the same with every sample YAML of
// the pinned KubeRay release, the YAML users copy first.
// TestBuiltinKindsMatchTheAPIServer holds the built-in kinds and their
// scope to a real API server's discovery, and TestKubeconformFixtures runs
// a public validator's acceptance fixtures.
package validation
