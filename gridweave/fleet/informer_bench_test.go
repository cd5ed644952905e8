package fleet_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/testcluster"
)

// BenchmarkNodeWatch10k is the fleet's Node watch (KubeNodes.Watch, a
// client-go informer) over 10,000 Nodes of the real API server, each with
// a /30 pod CIDR and an InternalIP, as a fleet of joined machines has:
// the time to list them all into the cache and the heap it holds
// (heap-MB, after a collection). Not kwok-managed: only the objects.
//
//	go test -run '^$' -bench NodeWatch10k -benchtime 1x ./gridweave/fleet/
func BenchmarkNodeWatch10k(b *testing.B) {
	const nodes = 10_000
	tc := testcluster.Shared(b)
	ctx := context.Background()
	prefix := fmt.Sprintf("watch10k-%d", time.Now().UnixNano()%100000)
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 1)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i), Labels: map[string]string{fleet.MarkLabel: fmt.Sprintf("%040x", i)}},
					Spec:   corev1.NodeSpec{PodCIDR: fmt.Sprintf("198.19.%d.%d/30", i/64, (i%64)*4)},
					Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("198.18.%d.%d", 64+i/250, 1+i%250)}}}}
				if _, err := tc.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.Cleanup(func() {
		for i := range nodes {
			_ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%05d", prefix, i), metav1.DeleteOptions{})
		}
	})
	var heap float64
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		watchCtx, cancel := context.WithCancel(ctx)
		k := &fleet.KubeNodes{Client: tc.Kube}
		var seen atomic.Int64
		synced := make(chan struct{})
		go func() {
			_ = k.Watch(watchCtx, func(kn fleet.KubeNode) {
				if len(kn.Name) > len(prefix) && kn.Name[:len(prefix)] == prefix {
					if seen.Add(1) == nodes {
						close(synced)
					}
				}
			})
		}()
		select {
		case <-synced:
		case <-time.After(5 * time.Minute):
			b.Fatalf("the watch delivered %d of %d Nodes in 5 minutes", seen.Load(), nodes)
		}
		for !k.Synced() {
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		cancel()
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-MB")
}
