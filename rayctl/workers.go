package rayctl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// Worker is one worker pod of a RayCluster.
type Worker struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Node  string `json:"node"`
	Phase string `json:"phase"`
	// Reason says why a worker that is not running waits: the scheduler's
	// message (e.g. "0/4 nodes are available: 4 Insufficient
	// nvidia.com/gpu"), or a container's waiting reason (ImagePullBackOff);
	// empty when it runs.
	Reason    string    `json:"reason"`
	Ready     bool      `json:"ready"`
	GPUs      int64     `json:"gpus"`
	IP        string    `json:"ip"`
	CreatedAt time.Time `json:"created_at"`
}

// ListWorkers lists the worker pods of a cluster, or of one group if group
// is not empty, ordered by group and name.
func (c *Client) ListWorkers(ctx context.Context, namespace, cluster, group string) ([]Worker, error) {
	namespace = c.ns(namespace)
	selector := clusterSelector(cluster) + ",ray.io/node-type=worker"
	if group != "" {
		selector += ",ray.io/group=" + group
	}
	pods, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(pods.Items))
	for _, p := range pods.Items {
		out = append(out, workerOf(&p))
	}
	slices.SortFunc(out, func(a, b Worker) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func workerOf(p *corev1.Pod) Worker {
	w := Worker{
		Name: p.Name, Group: p.Labels["ray.io/group"], Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
		IP: p.Status.PodIP, CreatedAt: p.CreationTimestamp.Time,
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			w.Ready = true
		}
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && w.Reason == "" {
			w.Reason = strings.TrimSpace(cond.Reason + ": " + cond.Message)
		}
	}
	if w.Reason == "" && p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodSucceeded {
		for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			if wt := cs.State.Waiting; wt != nil && wt.Reason != "" {
				w.Reason = strings.TrimSpace(cs.Name + ": " + wt.Reason + " " + wt.Message)
				break
			}
		}
	}
	for _, ctr := range p.Spec.Containers {
		for name, q := range ctr.Resources.Limits {
			if strings.HasSuffix(string(name), "gpu") {
				w.GPUs += q.Value()
			}
		}
	}
	return w
}

// GroupStatus is a worker group's spec with its desired and observed counts.
type GroupStatus struct {
	Name        string `json:"name"`
	Replicas    int32  `json:"replicas"`
	MinReplicas int32  `json:"min_replicas"`
	MaxReplicas int32  `json:"max_replicas"`
	Pods        int    `json:"pods"`
	Running     int    `json:"running"`
	Ready       int    `json:"ready"`
	GPUsPerPod  int64  `json:"gpus_per_pod"`
	Image       string `json:"image"`
	// Spec is the group as the RayCluster holds it.
	Spec rayv1.WorkerGroupSpec `json:"spec"`
}

// ListWorkerGroups returns each group's spec figures with its pod counts.
func (c *Client) ListWorkerGroups(ctx context.Context, namespace, cluster string) ([]GroupStatus, error) {
	rc, err := c.GetCluster(ctx, namespace, cluster)
	if err != nil {
		return nil, err
	}
	workers, err := c.ListWorkers(ctx, rc.Namespace, cluster, "")
	if err != nil {
		return nil, err
	}
	out := make([]GroupStatus, 0, len(rc.Spec.WorkerGroupSpecs))
	for _, g := range rc.Spec.WorkerGroupSpecs {
		st := GroupStatus{Spec: g, Name: g.GroupName, Replicas: ptr.Deref(g.Replicas, 0), MinReplicas: ptr.Deref(g.MinReplicas, 0), MaxReplicas: ptr.Deref(g.MaxReplicas, 0)}
		if len(g.Template.Spec.Containers) > 0 {
			ctr := g.Template.Spec.Containers[0]
			st.Image = ctr.Image
			for name, q := range ctr.Resources.Limits {
				if strings.HasSuffix(string(name), "gpu") {
					st.GPUsPerPod += q.Value()
				}
			}
		}
		for _, w := range workers {
			if w.Group != g.GroupName {
				continue
			}
			st.Pods++
			if w.Phase == string(corev1.PodRunning) {
				st.Running++
			}
			if w.Ready {
				st.Ready++
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// LogOptions select log lines.
type LogOptions struct {
	Container string        // default the pod's first container
	TailLines *int64        // only the last N lines
	Since     time.Duration // only lines newer than this
	Follow    bool          // keep streaming until ctx ends or the pod stops
}

func (o LogOptions) pod() *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: o.Container, TailLines: o.TailLines, Follow: o.Follow}
	if o.Since > 0 {
		opts.SinceSeconds = ptr.To(int64((o.Since + time.Second - 1) / time.Second))
	}
	return opts
}

// PodLogs streams one pod's log. The caller closes the stream.
func (c *Client) PodLogs(ctx context.Context, namespace, pod string, opts LogOptions) (io.ReadCloser, error) {
	return c.kube.CoreV1().Pods(c.ns(namespace)).GetLogs(pod, opts.pod()).Stream(ctx)
}

// GroupLogs streams the logs of every pod of a worker group, each line
// prefixed with "[pod] ". Without Follow the pods come one after another;
// with Follow each pod's stream is opened and read concurrently and lines
// interleave as they arrive (a following stream may send nothing, not even
// headers, until its pod logs a line). The caller closes the stream, which
// ends every pod's stream. An error opening or reading a pod's log ends the
// stream with that error as soon as it happens (with Follow, the other
// pods' streams are closed then).
func (c *Client) GroupLogs(ctx context.Context, namespace, cluster, group string, opts LogOptions) (io.ReadCloser, error) {
	namespace = c.ns(namespace)
	workers, err := c.ListWorkers(ctx, namespace, cluster, group)
	if err != nil {
		return nil, err
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("%w: no pods in worker group %q of %s/%s", ErrNotFound, group, namespace, cluster)
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	var mu sync.Mutex
	copyPod := func(name string) error {
		s, err := c.PodLogs(ctx, namespace, name, opts)
		if err != nil {
			return fmt.Errorf("open logs of pod %s: %w", name, err)
		}
		defer s.Close()
		sc := bufio.NewScanner(s)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			_, err := fmt.Fprintf(pw, "[%s] %s\n", name, sc.Text())
			mu.Unlock()
			if err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read logs of pod %s: %w", name, err)
		}
		return nil
	}
	go func() {
		defer cancel()
		if !opts.Follow {
			for _, w := range workers {
				if err := copyPod(w.Name); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.Close()
			return
		}
		// The first error ends the whole stream at once and stops the
		// other pods' streams, which may never end by themselves.
		var wg sync.WaitGroup
		var failOnce sync.Once
		for _, w := range workers {
			wg.Go(func() {
				if err := copyPod(w.Name); err != nil {
					failOnce.Do(func() {
						pw.CloseWithError(err)
						cancel()
					})
				}
			})
		}
		wg.Wait()
		pw.Close() // keeps the error of CloseWithError, if any
	}()
	return &groupLogStream{PipeReader: pr, cancel: cancel}, nil
}

type groupLogStream struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (g *groupLogStream) Close() error {
	g.cancel()
	return g.PipeReader.Close()
}

// waitNoPods watches pods matching selector until there are none.
func (c *Client) waitNoPods(ctx context.Context, namespace, selector string) error {
	pods := c.kube.CoreV1().Pods(namespace)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		left := map[string]bool{}
		for _, p := range list.Items {
			left[p.Name] = true
		}
		if len(left) == 0 {
			return nil
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		done, err := drainWatch(ctx, w, left)
		if err != nil || done {
			return err
		}
	}
}

func drainWatch(ctx context.Context, w watch.Interface, left map[string]bool) (bool, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%d pods still present: %w", len(left), ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			switch ev.Type {
			case watch.Deleted:
				delete(left, p.Name)
			case watch.Added:
				left[p.Name] = true
			}
			if len(left) == 0 {
				return true, nil
			}
		}
	}
}
