package gridweave_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"gridweave.dev/gridweave"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/joinkeys/sqlitestore"
)

// benchHarness is the service over SQLite (in a temp dir), the in-memory
// mesh and the in-memory cluster, with the rate limit out of the way.
func benchHarness(b *testing.B, sync sqlitestore.Sync) *harness {
	store, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), &sqlitestore.Options{Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	return newHarness(b, &harnessOptions{store: store, config: func(c *gridweave.Config) { c.RateLimitPerMinute = 1 << 30 }})
}

// prefill puts n nodes in the ledger (through the Keyring, not HTTP).
func prefill(b *testing.B, h *harness, n int, gpus func(i int) []joinkeys.GPU) {
	ctx := context.Background()
	m, err := h.kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		j, err := h.kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("pre-%05d", i), PublicKey: newNode(b, "x").public})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: j.Node.Hostname, GPUs: gpus(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJoin is one CPU-only node's validate + register over HTTP on
// loopback: ns/op is per join, so joins/s = 1e9 / ns/op. The figure at
// 10,000 nodes in the ledger should stay within 1.5x of the one at 100.
//
//	go test -run '^$' -bench BenchmarkJoin -benchmem ./gridweave/
func BenchmarkJoin(b *testing.B) {
	for _, c := range []struct {
		existing int
		sync     sqlitestore.Sync
		name     string
	}{{100, sqlitestore.SyncFull, "full"}, {10000, sqlitestore.SyncFull, "full"}, {100, sqlitestore.SyncNormal, "normal"}, {10000, sqlitestore.SyncNormal, "normal"}} {
		existing := c.existing
		b.Run(fmt.Sprintf("cpu/sync=%s/existing=%d", c.name, existing), func(b *testing.B) {
			h := benchHarness(b, c.sync)
			prefill(b, h, existing, func(int) []joinkeys.GPU { return nil })
			_, key := h.mint("org")
			i := 0
			for b.Loop() {
				n := newNode(b, fmt.Sprintf("new-%06d", i))
				i++
				if r := h.validate(n, key); r.status != 200 {
					b.Fatalf("validate: %d %s", r.status, r.raw)
				}
				if r := h.register(n, nil); r.status != 200 {
					b.Fatalf("register: %d %s", r.status, r.raw)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
		})
	}
	for _, existing := range []int{100, 1000} {
		b.Run(fmt.Sprintf("gpu/existing=%d", existing), func(b *testing.B) {
			h := benchHarness(b, sqlitestore.SyncNormal)
			kinds := []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "AMD Instinct MI300X"}
			gpusOf := func(i int) []joinkeys.GPU {
				vendor := joinkeys.VendorNVIDIA
				if i%4 == 3 {
					vendor = joinkeys.VendorAMD
				}
				gpus := make([]joinkeys.GPU, 8)
				for k := range gpus {
					gpus[k] = joinkeys.GPU{Index: k, Vendor: vendor, Name: kinds[i%4], MemoryMiB: 81559}
				}
				return gpus
			}
			prefill(b, h, existing, gpusOf)
			_, key := h.mint("org")
			i := 0
			for b.Loop() {
				n := newNode(b, fmt.Sprintf("new-%06d", i))
				if r := h.validate(n, key); r.status != 200 {
					b.Fatalf("validate: %d %s", r.status, r.raw)
				}
				gpus := h100s(8)
				for _, g := range gpus {
					g["name"] = kinds[i%3]
				}
				i++
				if r := h.register(n, gpus); r.status != 200 {
					b.Fatalf("register: %d %s", r.status, r.raw)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
		})
	}
}

// BenchmarkValidateUnderLoad runs validates from 64 concurrent clients and
// reports the 50th and 99th percentile latency.
//
//	go test -run '^$' -bench BenchmarkValidateUnderLoad -benchmem ./gridweave/
func BenchmarkValidateUnderLoad(b *testing.B) {
	const clients = 64
	h := benchHarness(b, sqlitestore.SyncNormal) // the server's default
	_, key := h.mint("org")
	var mu sync.Mutex
	var latencies []time.Duration
	next := 0
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0))) // RunParallel starts parallelism × GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			name := fmt.Sprintf("load-%07d", next)
			next++
			mu.Unlock()
			n := newNode(b, name)
			start := time.Now()
			r := h.validate(n, key)
			elapsed := time.Since(start)
			if r.status != 200 {
				b.Errorf("validate: %d %s", r.status, r.raw)
				return
			}
			mu.Lock()
			latencies = append(latencies, elapsed)
			mu.Unlock()
		}
	})
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkJoinOnTheKubernetesLedger is BenchmarkJoin with the ledger in
// the real API server (joinkeys/kubestore, as KUBERAY_STORE=kubernetes
// runs it) and 16 machines joining at once. The figure at 5,000 nodes in
// the ledger should stay near the one at 100. ns/op is per join, and each
// ledger's joins/s is reported (timeInterleaved).
//
//	go test -run '^$' -bench BenchmarkJoinOnTheKubernetesLedger -benchtime 2000x ./gridweave/
func BenchmarkJoinOnTheKubernetesLedger(b *testing.B) {
	const clients = 16
	tc := testcluster.Shared(b)
	ctx := context.Background()
	if err := kubestore.InstallCRDs(ctx, tc.Config); err != nil {
		b.Fatal(err)
	}
	ledgers := fillLedgers(b, clients, func(existing int) *benchLedger {
		ns := fmt.Sprintf("bench-ledger-%d-%d", existing, realSeq.Add(1))
		if err := tc.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		store, err := kubestore.New(tc.Config, ns, nil)
		if err != nil {
			b.Fatal(err)
		}
		h := newHarness(b, &harnessOptions{store: store, benchmark: true, config: func(c *gridweave.Config) { c.RateLimitPerMinute = 1 << 30 }})
		return &benchLedger{fill: h, harnesses: []*harness{h}, through: func(int64) *harness { return h }}
	})
	b.Run(fmt.Sprintf("cpu/clients=%d", clients), func(b *testing.B) {
		timeInterleaved(b, clients, ledgers)
	})
}

// BenchmarkJoinThroughThreeReplicas is BenchmarkJoinOnTheKubernetesLedger
// with three servers on the ledger, as KUBERAY_STORE=kubernetes runs
// them: one leads (it writes the ledger, from its index), two follow
// (they read the API server and hand their writes to the leader over
// HTTP), and the 16 machines join through all three in turn. ns/op is
// per join, and each ledger's joins/s (timeInterleaved) and the API
// server requests per join are reported.
//
//	go test -run '^$' -bench BenchmarkJoinThroughThreeReplicas -benchtime 2000x ./gridweave/
func BenchmarkJoinThroughThreeReplicas(b *testing.B) {
	const clients = 16
	tc := testcluster.Shared(b)
	ctx := context.Background()
	if err := kubestore.InstallCRDs(ctx, tc.Config); err != nil {
		b.Fatal(err)
	}
	credential := leaderstore.Credential([]byte(testSecret))
	ledgers := fillLedgers(b, clients, func(existing int) *benchLedger {
		ns := fmt.Sprintf("bench-replicas-%d-%d", existing, realSeq.Add(1))
		if err := tc.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		// Every replica's requests to the API server are counted.
		counted := &testcluster.RequestCounter{}
		cfg := rest.CopyConfig(tc.Config)
		cfg.WrapTransport = counted.Wrap
		writer, err := kubestore.New(cfg, ns, nil)
		if err != nil {
			b.Fatal(err)
		}
		channel := httptest.NewServer(leaderstore.Handler(writer, leaderstore.HandlerOptions{Credential: credential, Leading: func() bool { return true }}))
		b.Cleanup(channel.Close)
		var replicas []*harness
		for i := range 3 {
			local, target := writer, leaderstore.Target{Self: true}
			if i > 0 {
				if local, err = kubestore.New(cfg, ns, nil); err != nil {
					b.Fatal(err)
				}
				target = leaderstore.Target{URL: channel.URL}
			}
			store, err := leaderstore.New(local, leaderstore.Options{Credential: credential,
				Leader: func(context.Context, bool) (leaderstore.Target, error) { return target, nil }})
			if err != nil {
				b.Fatal(err)
			}
			replicas = append(replicas, newHarness(b, &harnessOptions{store: store, benchmark: true, config: func(c *gridweave.Config) { c.RateLimitPerMinute = 1 << 30 }}))
		}
		return &benchLedger{fill: replicas[0], minter: replicas[1], harnesses: replicas, counted: counted,
			through: func(i int64) *harness { return replicas[i%3] }}
	})
	b.Run(fmt.Sprintf("replicas=3/clients=%d", clients), func(b *testing.B) {
		timeInterleaved(b, clients, ledgers)
	})
}

// ledgerSizes are the numbers of nodes in the ledger that the Kubernetes
// ledger's join benchmarks compare.
var ledgerSizes = []int{100, 5000}

// benchLedger is one ledger of a join benchmark: its nodes put in through
// fill, its key minted through minter (fill when nil), its joins made
// through through(i), harnesses all of those, and its API server
// requests counted by counted (when not nil).
type benchLedger struct {
	existing  int
	fill      *harness
	minter    *harness
	through   func(i int64) *harness
	harnesses []*harness
	counted   *testcluster.RequestCounter
	runs      atomic.Int64
}

// fillLedgers makes a ledger of each of ledgerSizes with open and fills
// it, the largest first, to its size: all but warmUpJoins of its nodes
// through the Keyring, the rest joined over HTTP by clients at once, the
// way timeInterleaved joins them, which opens their connections.
func fillLedgers(b *testing.B, clients int, open func(existing int) *benchLedger) []*benchLedger {
	ledgers := make([]*benchLedger, len(ledgerSizes))
	for i, existing := range slices.Backward(ledgerSizes) {
		l := open(existing)
		l.existing = existing
		if l.minter == nil {
			l.minter = l.fill
		}
		prefillConcurrently(b, l.fill, existing-warmUpJoins, clients)
		_, key := l.minter.mint("org")
		joinAtOnce(b, clients, key, newNodes(b, "warm-", 0, warmUpJoins), l.through)
		ledgers[i] = l
	}
	return ledgers
}

// interleavedRound is how many joins timeInterleaved makes on one ledger
// before it turns to the next.
const interleavedRound = 500

// timeInterleaved times b.N joins on each of ledgers by clients at once,
// in rounds of interleavedRound joins on each in turn, and reports each
// ledger's joins/s (as joins/s-at-<nodes>, its size before the first
// run; each join adds a node) and, when counted, the API server requests
// per join over all of them. The rounds interleave because the API server
// keeps each resource's recent writes (its watch cache's history, up to
// 75 seconds' worth), and the more it keeps the more each write costs
// it: a ledger timed just after the other's fill or timing would be
// measured against a longer history. Interleaved, the ledgers differ in
// their size alone.
func timeInterleaved(b *testing.B, clients int, ledgers []*benchLedger) {
	keys := make([]string, len(ledgers))
	prefixes := make([]string, len(ledgers))
	for i, l := range ledgers {
		for _, h := range l.harnesses {
			h.t = b // their failures are this run's
		}
		_, keys[i] = l.minter.mint("org")
		prefixes[i] = fmt.Sprintf("run%d-", l.runs.Add(1)) // b.Run calls this more than once
	}
	var callsBefore int64
	for _, l := range ledgers {
		if l.counted != nil {
			callsBefore += l.counted.Count()
		}
	}
	elapsed := make([]time.Duration, len(ledgers))
	b.ResetTimer()
	for done := 0; done < b.N; done += interleavedRound {
		n := min(interleavedRound, b.N-done)
		order := make([]int, len(ledgers)) // every other round backwards: no ledger always first
		for i := range order {
			order[i] = i
		}
		if done/interleavedRound%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			l := ledgers[i]
			b.StopTimer()
			machines := newNodes(b, fmt.Sprintf("%snew-", prefixes[i]), done, n)
			b.StartTimer()
			start := time.Now()
			joinAtOnce(b, clients, keys[i], machines, l.through)
			elapsed[i] += time.Since(start)
		}
	}
	b.StopTimer()
	var calls int64
	counted := false
	for i, l := range ledgers {
		b.ReportMetric(float64(b.N)/elapsed[i].Seconds(), fmt.Sprintf("joins/s-at-%d", l.existing))
		if l.counted != nil {
			calls += l.counted.Count()
			counted = true
		}
	}
	b.ReportMetric(float64(b.N*len(ledgers))/b.Elapsed().Seconds(), "joins/s")
	if counted {
		b.ReportMetric(float64(calls-callsBefore)/float64(b.N*len(ledgers)), "api-calls/join")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ledgers)), "ns/op")
}

// newNodes makes n machines (their key pairs made, as each machine makes
// its own), named from prefix and numbered from first+1.
func newNodes(b *testing.B, prefix string, first, n int) []*node {
	out := make([]*node, n)
	for i := range out {
		out[i] = newNode(b, fmt.Sprintf("%s%07d", prefix, first+i+1))
	}
	return out
}

// joinAtOnce joins machines by clients at once, the i-th (from 0)
// through through(i).
func joinAtOnce(b *testing.B, clients int, key string, machines []*node, through func(i int64) *harness) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(machines)); i = next.Add(1) - 1 {
				h, machine := through(i), machines[i]
				if r := h.validate(machine, key); r.status != 200 {
					b.Errorf("validate: %d %s", r.status, r.raw)
					return
				}
				if r := h.register(machine, nil); r.status != 200 {
					b.Errorf("register: %d %s", r.status, r.raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// warmUpJoins is how many of a ledger's nodes fillLedgers joins over
// HTTP.
const warmUpJoins = 50

// prefillConcurrently is prefill with CPU nodes, by clients at once.
func prefillConcurrently(b *testing.B, h *harness, n, clients int) {
	ctx := context.Background()
	m, err := h.kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				j, err := h.kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("pre-%05d", i), PublicKey: newNode(b, "x").public})
				if err == nil {
					_, err = h.kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: j.Node.Hostname})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
