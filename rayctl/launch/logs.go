package launch

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// LogOptions select which pods and lines Logs streams.
type LogOptions struct {
	// Target is "head", "submitter", "sandbox", or a worker group's name;
	// empty: every pod of the launch.
	Target   string
	Follow   bool
	Tail     *int64
	Since    time.Duration
	Previous bool
}

// Logs writes the log lines of the launch's pods that opts selects to w,
// each prefixed with "[pod] "; with Follow the pods' streams are read at
// once and interleave as lines arrive.
func (s *Session) Logs(ctx context.Context, namespace, name string, opts LogOptions, w io.Writer) error {
	pods, err := s.podsOf(ctx, namespace, name)
	if err != nil {
		return err
	}
	// The Ray container is a pod's first (KubeRay puts it there; sidecars
	// such as the autoscaler come after it); a RayJob's submitter in
	// SidecarMode is a container of the head pod.
	type podLog struct {
		pod       corev1.Pod
		container string
	}
	var picked []podLog
	matched := 0
	for _, p := range pods {
		container := ""
		if len(p.Spec.Containers) > 0 {
			container = p.Spec.Containers[0].Name
		}
		switch fleet := Fleet(&p); {
		case opts.Target == "" || fleet == opts.Target:
		case opts.Target == "submitter" && fleet == "head" && slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == sidecarSubmitter }):
			container = sidecarSubmitter
		default:
			continue
		}
		matched++
		// A pod not started yet has no log: said, not an error.
		if p.Status.Phase == corev1.PodPending && !opts.Previous {
			fmt.Fprintf(w, "[%s] (no log yet: the pod is Pending%s)\n", p.Name, problemSuffix(&p))
			continue
		}
		picked = append(picked, podLog{p, container})
	}
	if matched == 0 {
		return fmt.Errorf("no pods of %q in launch %s/%s (targets: head, submitter, sandbox or a worker group)", opts.Target, namespace, name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	copyPod := func(pl podLog) error {
		p := pl.pod
		podOpts := &corev1.PodLogOptions{Container: pl.container, Follow: opts.Follow, TailLines: opts.Tail, Previous: opts.Previous}
		if opts.Since > 0 {
			podOpts.SinceSeconds = ptr.To(int64((opts.Since + time.Second - 1) / time.Second))
		}
		stream, err := s.Kube.CoreV1().Pods(namespace).GetLogs(p.Name, podOpts).Stream(ctx)
		if err != nil {
			return fmt.Errorf("logs of pod %s: %w", p.Name, err)
		}
		defer stream.Close()
		sc := bufio.NewScanner(stream)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			_, err := fmt.Fprintf(w, "[%s] %s\n", p.Name, sc.Text())
			mu.Unlock()
			if err != nil {
				return err
			}
		}
		return sc.Err()
	}
	if !opts.Follow {
		for _, p := range picked {
			if err := copyPod(p); err != nil {
				return err
			}
		}
		return nil
	}
	// Following, the first pod whose stream fails ends them all, at once.
	errs := make(chan error, len(picked))
	for _, p := range picked {
		go func() { errs <- copyPod(p) }()
	}
	var first error
	for range picked {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
			cancel()
		}
	}
	return first
}

// sidecarSubmitter is the name of the container KubeRay adds to the head
// pod of a RayJob in SidecarMode to submit its job.
const sidecarSubmitter = "ray-job-submitter"

func problemSuffix(p *corev1.Pod) string {
	if problem := PodProblem(p); problem != "" {
		return ": " + problem
	}
	return ""
}
