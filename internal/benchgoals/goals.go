package benchgoals

import (
	"context"
	"errors"
)

// Goals are every goal docs/testing.md's benchmark section names, in the
// order it names them.
func Goals() []Goal {
	return []Goal{
		{
			Name:    "10,000 GPU machines join over HTTP (SQLite, embedded cluster, 16 clients)",
			Command: "joinload --nodes 10000 --clients 16 --gpus against examples/server (TLS=off, WG_INTERFACE=none)",
			Short:   true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				j, err := r.Joins(ctx, JoinOptions{Nodes: 10_000, GPUs: true})
				if err != nil {
					return nil, err
				}
				r.gpuJoins = j.PerSec
				return []Figure{AtLeast("joins/s", j.PerSec, "joins/s", 1000), AtLeast("last tenth ÷ first", j.LastTenth/j.FirstTenth, "", 0.9)}, nil
			},
		},
		{
			Name:    "10,000 GPU machines join with a wireguard-go device (WG_INTERFACE; in a network namespace)",
			Command: "the same with WG_INTERFACE=gwbench0, the server and joinload in a network namespace",
			Short:   true,
			Root:    true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				j, err := r.Joins(ctx, JoinOptions{Nodes: 10_000, GPUs: true, WireGuard: true})
				if err != nil {
					return nil, err
				}
				out := []Figure{{What: "joins/s", Value: j.PerSec, Unit: "joins/s"}, AtLeast("last tenth ÷ first", j.LastTenth/j.FirstTenth, "", 0.9)}
				if r.gpuJoins > 0 {
					out = append(out, AtLeast("÷ the in-memory mesh's", j.PerSec/r.gpuJoins, "", 0.7))
				}
				return out, nil
			},
		},
		{
			Name:    "10,000 CPU machines join over HTTP (SQLite, embedded cluster, 16 clients)",
			Command: "joinload --nodes 10000 --clients 16 against examples/server (TLS=off, WG_INTERFACE=none)",
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				j, err := r.Joins(ctx, JoinOptions{Nodes: 10_000})
				if err != nil {
					return nil, err
				}
				return []Figure{AtLeast("joins/s", j.PerSec, "joins/s", 1000), AtLeast("last tenth ÷ first", j.LastTenth/j.FirstTenth, "", 0.8)}, nil
			},
		},
		{
			Name:    "joins on the Kubernetes ledger (real API server, 16 clients)",
			Command: "go test -run '^$' -bench BenchmarkJoinOnTheKubernetesLedger -benchtime 1000x ./gridweave/",
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./gridweave/", "BenchmarkJoinOnTheKubernetesLedger", "1000x")
				if err != nil {
					return nil, err
				}
				var out []Figure
				for _, existing := range []string{"100", "5000"} {
					v, err := metric(res, "BenchmarkJoinOnTheKubernetesLedger/cpu/clients=16", "joins/s-at-"+existing)
					if err != nil {
						return nil, err
					}
					out = append(out, AtLeast("with "+existing+" nodes", v, "joins/s", 200))
				}
				return out, nil
			},
		},
		{
			Name:    "joins through three replicas on the Kubernetes ledger (the leader writes, 16 clients)",
			Command: "go test -run '^$' -bench BenchmarkJoinThroughThreeReplicas -benchtime 1000x ./gridweave/",
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./gridweave/", "BenchmarkJoinThroughThreeReplicas", "1000x")
				if err != nil {
					return nil, err
				}
				const bench = "BenchmarkJoinThroughThreeReplicas/replicas=3/clients=16"
				few, err := metric(res, bench, "joins/s-at-100")
				if err != nil {
					return nil, err
				}
				many, err := metric(res, bench, "joins/s-at-5000")
				if err != nil {
					return nil, err
				}
				calls, err := metric(res, bench, "api-calls/join")
				if err != nil {
					return nil, err
				}
				return []Figure{AtLeast("with 100 nodes", few, "joins/s", 250), AtLeast("with 5000 nodes ÷ with 100", many/few, "", 0.9),
					AtMost("API requests per join", calls, "", 4)}, nil
			},
		},
		{
			Name:    "the launcher as users run it (a fresh process each time)",
			Command: "go test -run '^$' -bench BenchmarkProcess ./rayctl/launch/launchcli/",
			Short:   true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./rayctl/launch/launchcli/", "BenchmarkProcess", "1x")
				if err != nil {
					return nil, err
				}
				var missing error
				get := func(sub, unit string) float64 {
					v, err := metric(res, "BenchmarkProcess/"+sub, unit)
					missing = errors.Join(missing, err)
					return v
				}
				lint, kubeconform := get("lint-RayCluster", "ns/op"), get("kubeconform-RayCluster", "ns/op")
				figures := []Figure{
					AtMost("lint of one RayCluster ÷ kubeconform's wall time", lint/kubeconform, "", 0.5),
					AtMost("lint of one RayCluster, peak", get("lint-RayCluster", "peak-MB"), "MB", 40),
					AtMost("check grpo_swe", get("check-grpo_swe", "ns/op")/1e6, "ms", 55),
					AtMost("lint of the users' corpus", get("lint-users-corpus", "ns/op")/1e6, "ms", 150),
					AtMost("lint of valid_large.yaml (a List of 100,000)", get("lint-valid_large", "ns/op")/1e9, "s", 3),
					AtMost("lint of valid_large.yaml, peak", get("lint-valid_large", "peak-MB"), "MB", 200),
				}
				return figures, missing
			},
		},
		{
			Name:    "restart with 10,000 nodes (wireguard-go device, netlink routes)",
			Command: "sudo go test -run '^$' -bench RestoreMesh10k -benchtime 3x ./gridweave/fleet/",
			Root:    true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./gridweave/fleet/", "RestoreMesh10k", "3x")
				if err != nil {
					return nil, err
				}
				ns, err := metric(res, "BenchmarkRestoreMesh10k", "ns/op")
				if err != nil {
					return nil, err
				}
				rss, err := metric(res, "BenchmarkRestoreMesh10k", "rss-MB")
				if err != nil {
					return nil, err
				}
				return []Figure{AtMost("mesh and routes rebuilt", ns/1e9, "s", 10), AtMost("resident set", rss, "MB", 300)}, nil
			},
		},
		{
			Name:    "direct links against the hub (two machines, wireguard-go)",
			Command: "sudo go test -run '^$' -bench DirectVersusHub -benchtime 20x ./examples/join-node/",
			Root:    true,
			Short:   true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./examples/join-node/", "DirectVersusHub", "20x")
				if err != nil {
					return nil, err
				}
				direct, err := metric(res, "BenchmarkDirectVersusHub/direct", "MB/s")
				if err != nil {
					return nil, err
				}
				hub, err := metric(res, "BenchmarkDirectVersusHub/hub", "MB/s")
				if err != nil {
					return nil, err
				}
				up, err := metric(res, "BenchmarkDirectVersusHub/direct", "link_up_s")
				if err != nil {
					return nil, err
				}
				return []Figure{
					{What: "direct", Value: direct, Unit: "MB/s"},
					{What: "through the master", Value: hub, Unit: "MB/s"},
					AtLeast("direct ÷ through the master", direct/hub, "", 1.8),
					AtMost("a new machine's direct link up after its register", up, "s", 5),
				}, nil
			},
		},
		{
			Name:    "direct links through NATs (ten machines: six behind port-keeping NATs, three open, one symmetric)",
			Command: "sudo go test -run '^$' -bench MeshThroughNATs -benchtime 1x ./examples/join-node/",
			Root:    true,
			Short:   true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./examples/join-node/", "MeshThroughNATs", "1x")
				if err != nil {
					return nil, err
				}
				var missing error
				get := func(unit string) float64 {
					v, err := metric(res, "BenchmarkMeshThroughNATs", unit)
					missing = errors.Join(missing, err)
					return v
				}
				return []Figure{
					AtMost("two port-keeping NATs' direct link up after the second's register", get("nat_link_up_s"), "s", 5),
					{What: "relayed pairs (of 45)", Value: get("relayed_pairs"), Unit: "pairs"},
					AtMost("relayed pairs with no symmetric NAT", get("relayed_without_symmetric"), "pairs", 0),
				}, missing
			},
		},
		{
			Name:    "10,000 machines waiting on the peer directory (another process, HTTP): one join",
			Command: "go test -run '^$' -bench BenchmarkDirectoryWatchers -benchtime 5x ./gridweave/",
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./gridweave/", "BenchmarkDirectoryWatchers", "5x")
				if err != nil {
					return nil, err
				}
				var missing error
				get := func(unit string) float64 {
					v, err := metric(res, "BenchmarkDirectoryWatchers", unit)
					missing = errors.Join(missing, err)
					return v
				}
				return []Figure{
					AtMost("the join reaches every watcher (the slowest of 5)", get("join-to-all-s"), "s", 2),
					AtMost("the server's egress for one join", get("egress-MB/join"), "MB", 20),
					AtMost("the server's memory per waiting watcher", get("server-KB/watcher"), "KB", 16),
				}, missing
			},
		},
		{
			Name:    "a real node of the kubelet join mode: join to Ready, a pod to Running, pod-to-pod throughput",
			Command: "sudo go test -run '^$' -bench PodToPod -benchtime 20x ./examples/join-node/",
			Root:    true,
			Short:   true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./examples/join-node/", "PodToPod", "20x")
				if err != nil {
					return nil, err
				}
				tunnel, err := metric(res, "BenchmarkPodToPod/tunnel", "MB/s")
				if err != nil {
					return nil, err
				}
				pods, err := metric(res, "BenchmarkPodToPod/pods", "MB/s")
				if err != nil {
					return nil, err
				}
				ready, err := metric(res, "BenchmarkPodToPod/tunnel", "join_to_ready_s")
				if err != nil {
					return nil, err
				}
				running, err := metric(res, "BenchmarkPodToPod/tunnel", "pod_running_s")
				if err != nil {
					return nil, err
				}
				return []Figure{
					AtMost("join command to Node Ready", ready, "s", 30),
					AtMost("pod created to Running", running, "s", 45),
					{What: "machine to machine (the tunnel)", Value: tunnel, Unit: "MB/s"},
					{What: "pod to pod", Value: pods, Unit: "MB/s"},
					AtLeast("pod to pod ÷ the tunnel", pods/tunnel, "", 0.8),
				}, nil
			},
		},
		{
			Name:    "Ray object transfer between two machines, through the master (bare Ray processes)",
			Command: "sudo go test -run '^$' -bench RayObjectTransferOverMesh -benchtime 3x ./examples/join-node/",
			Root:    true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./examples/join-node/", "RayObjectTransferOverMesh", "3x")
				if err != nil {
					return nil, err
				}
				v, err := metric(res, "BenchmarkRayObjectTransferOverMesh", "MiB/s")
				if err != nil {
					return nil, err
				}
				return []Figure{{What: "256 MiB", Value: v, Unit: "MiB/s"}}, nil
			},
		},
		{
			Name:    "Ray object transfer between worker pods on two real nodes, direct and through the master",
			Command: "sudo go test -run '^$' -bench RayPodTransfer -benchtime 8x ./examples/join-node/",
			Root:    true,
			Run: func(ctx context.Context, r *Runner) ([]Figure, error) {
				res, err := r.Bench(ctx, "./examples/join-node/", "RayPodTransfer", "8x")
				if err != nil {
					return nil, err
				}
				direct, err := metric(res, "BenchmarkRayPodTransfer/direct", "MiB/s")
				if err != nil {
					return nil, err
				}
				hub, err := metric(res, "BenchmarkRayPodTransfer/hub", "MiB/s")
				if err != nil {
					return nil, err
				}
				return []Figure{
					{What: "256 MiB, direct", Value: direct, Unit: "MiB/s"},
					{What: "256 MiB, through the master", Value: hub, Unit: "MiB/s"},
					AtLeast("direct ÷ through the master", direct/hub, "", 1.8),
				}, nil
			},
		},
	}
}
