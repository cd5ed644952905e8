// Package validation validates Kubernetes objects in process with the API
// server's semantics, runs KubeRay's own validation on ray.io objects as
// the operator reads them, and lints them with the Ray-aware rules of
// package operator. It is pure: it never talks to a cluster.
//
// # Where things are
//
// The engine (this package):
//   - validate.go: the Validator. ray.io objects go the way the API server
//     takes a create, step for step, through k8s.io/apiextensions-apiserver
//     with KubeRay's CRDs (crds/, embedded at the pinned version; the
//     Gateway API's standard CRDs are embedded the same way): decoding
//     (pruning of unknown fields, then of the nulls the schema allows
//     nowhere and defaults nowhere — a key written with no value, `env:`,
//     is dropped), defaulting, the request's namespace, the strategy's
//     PrepareForCreate (the status dropped, generation 1) and validation —
//     the CRD schema, embedded metadata, list types, CEL rules. Then
//     KubeRay's own validation runs on the object as the operator would
//     read it, as stored (kuberayrules.go): rayctl.OperatorRefusals, the
//     one port of the operator's rules, which rayctl holds word for word
//     to the operator's code.
//   - builtinkinds.go, builtinchecks.go: built-ins — every object kind of
//     client-go's scheme, with the API server's scope — decoded strictly
//     into their Go types (a null leaves the field's zero value, as in the
//     API server) and checked as the API server checks them.
//   - podtemplates.go: the pod-spec checks the API server makes when a pod
//     is created, run on every pod template of any kind.
//   - apiversions.go: API versions judged for a target Kubernetes release
//     (TargetKubernetes): removed ones are errors naming the release and
//     the replacement, deprecated ones warnings.
//   - lint.go, findings.go, rayrules.go: Lint (the Validator plus the
//     rules of package operator, in parallel, findings sorted, each with
//     its line), Finding.
//   - documents.go: reading users' YAML and JSON as a stream, re-exported
//     from manifest/internal/yamlstream.
//   - the fast paths (below): schemacheck.go, structuralplan.go,
//     typeddecode.go, reachedschema.go, precompiled.go,
//     precompiledcodec.go, library.go.
//
// The KubeRay operator's emulation (package operator): rules that read
// the operator's behaviour, and the resources `ray start` will see
// (ComputeStartResources, re-exported here).
//
// To add a check the API server makes, put it where its kind of object
// is checked (builtinchecks.go, podtemplates.go) and hold it to a real API
// server with a document in testdata/users (below). To add a Ray-aware
// rule, see package operator.
//
// # Fast paths
//
// The library walks follow the schema and copy a schema node per
// property. schemacheck.go, structuralplan.go and typeddecode.go walk the
// object instead: a compiled OpenAPI check that answers only "certainly
// valid" (comparing integers with bounds the way kube-openapi does,
// truncated to integers), a structural plan that prunes unknown fields
// exactly (naming them as the library does), drops nulls and applies
// defaults copying only the nodes they change and confirms list-type
// invariants, and a key-driven typed decode. Each leaves anything it does
// not mirror to the library, which decides and words the errors.
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
// stored once), which a valid object, or one with mistyped fields, needs
// alone, and each version's schema in apiextensions' internal form without
// descriptions (library.go), from which the library's parts are built one
// by one, only when an object needs them:
//   - the schema validators: kube-openapi validates only the values the
//     compiled check is not certain of, each with a validator of its own
//     schema node, read alone from the precompiled schema, and of the node
//     only what the value reaches (reachedschema.go; each finds word for
//     word what a validator of the whole finds:
//     TestValueValidatorsMatchWhole; once the whole schema is decoded for
//     another part, whole nodes are converted instead, and kept per node);
//   - the structural schema, for pruning, defaulting, list types and
//     embedded metadata where the plan leaves them to the library;
//   - the CEL validators: rules are compiled node by node, each schema
//     node's when an object first reaches it, and evaluated at the values
//     there (library.go validateCEL).
//
// What that costs is measured by the benchmarks (bench_test.go):
// BenchmarkValidateCold for a first object of each kind in a fresh
// library, BenchmarkValidate for the steady state, BenchmarkLintUsersCorpus
// for the users' corpus.
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
