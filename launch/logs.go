package launch

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	var picked []corev1.Pod
	for _, p := range pods {
		if opts.Target == "" || Fleet(&p) == opts.Target {
			picked = append(picked, p)
		}
	}
	if len(picked) == 0 {
		return fmt.Errorf("no pods of %q in launch %s/%s (targets: head, submitter, sandbox or a worker group)", opts.Target, namespace, name)
	}
	podOpts := &corev1.PodLogOptions{Follow: opts.Follow, TailLines: opts.Tail, Previous: opts.Previous}
	if opts.Since > 0 {
		podOpts.SinceSeconds = ptr.To(int64((opts.Since + time.Second - 1) / time.Second))
	}
	var mu sync.Mutex
	copyPod := func(p corev1.Pod) error {
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
	errs := make(chan error, len(picked))
	for _, p := range picked {
		go func() { errs <- copyPod(p) }()
	}
	var first error
	for range picked {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	return first
}
