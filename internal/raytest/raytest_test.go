package raytest

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"gridweave.dev/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(RunMain(m)) }

// TestHeadAndWorkerOnLoopback: a worker node on the shared head's loopback, the
// worker listed alive by the head with its custom resource; after the
// worker stops, Ray reports it dead and no process of it is left.
func TestHeadAndWorkerOnLoopback(t *testing.T) {
	head := Shared(t)
	worker := StartNodeT(t, NodeOptions{NetNS: SharedNamespace().Name, IP: "127.0.0.2", HeadAddress: head.GCSAddress, Resources: map[string]float64{"loopback-worker": 1}}, head.DashboardURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := ListNodes(ctx, http.DefaultClient, head.DashboardURL)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, n := range nodes {
		t.Logf("ray node %s %s head=%v resources=%v", n.IP, n.State, n.IsHead, n.ResourcesTotal)
		if n.IP == "127.0.0.2" && n.State == "ALIVE" && n.ResourcesTotal["loopback-worker"] == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the worker node is not listed alive with its resource: %+v", nodes)
	}
	worker.Stop()
	if left, err := testcluster.Leftovers("ray-" + worker.ID); err != nil || len(left) > 0 {
		t.Errorf("processes of the stopped worker still run: %v %v", left, err)
	}
	for {
		nodes, err := ListNodes(ctx, http.DefaultClient, head.DashboardURL)
		if err != nil {
			t.Fatal(err)
		}
		dead := false
		for _, n := range nodes {
			if n.IP == "127.0.0.2" && n.State == "DEAD" {
				dead = true
			}
		}
		if dead {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stopped worker is still listed alive: %+v", nodes)
		case <-time.After(time.Second):
		}
	}
}
