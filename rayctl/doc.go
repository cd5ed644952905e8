// Package rayctl operates Ray on Kubernetes through KubeRay's generated
// clientset and client-go. A Client, made from those two interfaces (no new
// interface of ours), offers:
//
//   - RayClusters: create from a typed ClusterSpec or a full RayCluster,
//     get, list by label selector, delete (optionally waiting), scale a
//     worker group;
//   - worker groups: add from a typed WorkerGroup or a raw WorkerGroupSpec
//     (validated with KubeRay's own rules before it is sent), remove with a
//     safe drain (scale to 0, wait until its pods are gone, then drop it;
//     put back as it was if the drain times out) or at once, swap one group
//     for another and replace the whole set (restarting exactly the groups
//     whose pods would now be made differently) — each change in ONE update
//     of the RayCluster, so the head and other groups are untouched;
//   - workers: pods with group, node, phase, readiness, GPUs and IP, groups
//     with desired and observed counts, and logs of a pod or a group as a
//     stream;
//   - RayJob and RayService create, get, delete and status;
//   - server-side apply of ordered object sets of any kind (field manager
//     "gridweave"), delete in reverse order, and watch-based waiting for
//     readiness with progress callbacks; Apply needs a dynamic client,
//     given with Client.WithDynamic.
//
// By default every change of a RayCluster is a read, an edit of the typed
// object and a JSON patch of only what the edit changed, conditional on the
// resourceVersion read: fields of a newer KubeRay CRD that these Go types
// do not know survive, and a concurrent writer makes the patch fail with
// 409 Conflict, which is retried from a fresh read with a bounded backoff
// whose waits end with the caller's context. The same path works on the
// fake clientsets. A Client serialises its own writes of one cluster, one
// attempt at a time; writes of different clusters never wait for each
// other. Options.Replace writes the edited object whole instead (an
// Update on the same resourceVersion), for an in-memory cluster whose
// objects only this process writes.
//
// Errors wrap ErrNotFound (ErrClusterNotFound and ErrGroupNotFound are
// kinds of it), ErrGroupExists, ErrInvalidSpec, ErrFailed or ErrJobStopped;
// Kubernetes errors stay recognisable to apierrors.Is*.
//
// rayctl/dashboard is the Ray dashboard client (Serve and Jobs);
// rayctl/raymem is an in-memory cluster; rayctl/rayctltest has fake
// clients with conflict injection; rayctl/launch is the launcher's live
// half (apply a rendered launch and follow it).
package rayctl
