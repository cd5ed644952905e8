// Package launch is the live half of the launcher: a Session applies a
// rendered launch (manifest.Render of a recipe and an infra spec) to a
// cluster and follows it. Run renders, refuses what lint calls an error,
// server-side-applies the objects (field manager "gridweave", apply order,
// never the namespace's ResourceQuota or LimitRange: those are a cluster
// administrator's) and, per launch.mode, waits for the RayJob, brings up a
// bare RayCluster, or submits to an existing cluster through the Ray
// dashboard. While it waits it says, in plain words, why pods are not
// running (the scheduler's reasons, image pull errors, crash loops).
//
// Status reports a launch per fleet (trainer, inference, sandbox: pods
// with phase, node and scheduling reason); Logs streams the head, a worker
// group, the job's submitter or the sandbox, each line prefixed with its
// pod; Down deletes exactly what Run applied (by its labels) and waits
// until it is gone; Dashboard reaches the Ray dashboard through the API
// server's service proxy (with the cluster's Ray token when it asks for
// one); SubmitJob sends local code and submits a job, and FollowJob
// follows its log to the end; Doctor checks what a launch needs from a
// cluster and says how to fix what is missing.
package launch
