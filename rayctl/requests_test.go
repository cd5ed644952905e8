package rayctl_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
)

// countingTransport counts the API requests that pass through it.
type countingTransport struct {
	next      http.RoundTripper
	mu        sync.Mutex
	n         int
	conflicts int
	by        map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.by[r.Method]++
	c.mu.Unlock()
	resp, err := c.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusConflict {
		c.mu.Lock()
		c.conflicts++
		c.mu.Unlock()
	}
	return resp, err
}

// take returns and resets the count, the number of 409 answers among
// them, and a per-method breakdown.
func (c *countingTransport) take() (int, int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, conflicts := c.n, c.conflicts
	var parts []string
	for m, k := range c.by {
		parts = append(parts, fmt.Sprintf("%s×%d", m, k))
	}
	sort.Strings(parts)
	c.n, c.conflicts, c.by = 0, 0, nil
	return n, conflicts, strings.Join(parts, " ")
}

// countedClient is a rayctl.Client whose every API request is counted.
func countedClient(tb testing.TB, e *env) (*rayctl.Client, *countingTransport) {
	counter := &countingTransport{}
	cfg := rest.CopyConfig(e.tc.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := rayctl.New(kube, ray, &rayctl.Options{Namespace: e.ns, PollInterval: 50 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	return c, counter
}

// TestRequestsPerOperation counts the API requests each operation makes on
// a real API server, prints the table, and holds each to its count without
// conflicts plus two (a GET and a PATCH) per 409 the operator's concurrent
// status writes caused, so that a regression (an extra GET, a lost watch)
// shows.
func TestRequestsPerOperation(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	c, counter := countedClient(t, e)
	gpuGroup := rayctl.WorkerGroup{Name: "g", NodeHostname: e.gpuNode, GPUs: 1}
	type step struct {
		name string
		max  int
		run  func() error
	}
	var table []string
	steps := []step{
		{"CreateCluster", 1, func() error { _, err := c.CreateCluster(ctx, e.spec("count")); return err }},
		{"WaitClusterReady", 2, func() error { return c.WaitClusterReady(ctx, "", "count", rayctl.WaitOptions{}) }},
		{"GetCluster", 1, func() error { _, err := c.GetCluster(ctx, "", "count"); return err }},
		{"ListClusters", 1, func() error { _, err := c.ListClusters(ctx, rayctl.ListOptions{}); return err }},
		{"AddWorkerGroup", 2, func() error { _, err := c.AddWorkerGroup(ctx, "", "count", gpuGroup); return err }},
		{"ScaleGroup", 2, func() error {
			_, err := c.ScaleGroup(ctx, "", "count", "g", rayctl.Scale{Replicas: ptr.To[int32](1)})
			return err
		}},
		{"ListWorkers", 1, func() error { _, err := c.ListWorkers(ctx, "", "count", ""); return err }},
		{"ListWorkerGroups", 2, func() error { _, err := c.ListWorkerGroups(ctx, "", "count"); return err }},
		{"SwapWorkerGroup", 3, func() error {
			next, _ := rayctl.WorkerGroup{Name: "h", NodeHostname: e.gpuNode, GPUs: 2}.Build()
			_, err := c.SwapWorkerGroup(ctx, "", "count", "g", next)
			return err
		}},
		{"ReplaceWorkerGroups", 4, func() error {
			a, _ := gpuGroup.Build()
			_, err := c.ReplaceWorkerGroups(ctx, "", "count", []rayv1.WorkerGroupSpec{a})
			return err
		}},
		// drain: GET+PATCH (scale to 0), watch and list until gone, GET+PATCH (drop)
		{"RemoveWorkerGroup (drain)", 6, func() error {
			_, err := c.RemoveWorkerGroup(ctx, "", "count", "g", rayctl.RemoveOptions{})
			return err
		}},
		{"AddWorkerGroup again", 2, func() error { _, err := c.AddWorkerGroup(ctx, "", "count", gpuGroup); return err }},
		{"RemoveWorkerGroup (immediate)", 3, func() error {
			_, err := c.RemoveWorkerGroup(ctx, "", "count", "g", rayctl.RemoveOptions{Immediate: true})
			return err
		}},
		{"DeleteCluster (wait)", 6, func() error { return c.DeleteCluster(ctx, "", "count", rayctl.DeleteOptions{Wait: true}) }},
	}
	_, _, _ = counter.take()
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		n, conflicts, detail := counter.take()
		table = append(table, fmt.Sprintf("%-30s %2d  %s  (409s retried: %d)", s.name, n, detail, conflicts))
		if n > s.max+2*conflicts {
			t.Errorf("%s made %d API requests with %d conflicts, want at most %d+2×%d (%s)", s.name, n, conflicts, s.max, conflicts, detail)
		}
	}
	t.Logf("API requests per operation:\n%s", strings.Join(table, "\n"))
}
