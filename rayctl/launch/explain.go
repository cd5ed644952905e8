package launch

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Fleet names the part of a launch a pod belongs to: "sandbox", "head",
// "submitter", or the Ray worker group (trainer, inference, ...).
func Fleet(p *corev1.Pod) string {
	l := p.Labels
	switch {
	case l["app.kubernetes.io/component"] == "sandbox":
		return "sandbox"
	case l["ray.io/node-type"] == "head":
		return "head"
	case l["ray.io/group"] != "":
		return l["ray.io/group"]
	case l["batch.kubernetes.io/job-name"] != "" || l["job-name"] != "":
		return "submitter"
	}
	return "other"
}

// PodProblem is why one pod is not running, in plain words; empty when
// nothing is wrong (running, or just starting).
func PodProblem(p *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return fmt.Sprintf("container %s cannot pull image %s (%s: %s)", cs.Name, cs.Image, w.Reason, firstLine(w.Message))
			case "CrashLoopBackOff":
				return fmt.Sprintf("container %s keeps crashing (%d restarts; see launcher logs --previous)", cs.Name, cs.RestartCount)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("container %s cannot start (%s: %s)", cs.Name, w.Reason, firstLine(w.Message))
			}
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && p.Status.Phase != corev1.PodSucceeded {
			return fmt.Sprintf("container %s exited with code %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	if p.Status.Phase == corev1.PodPending {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return SchedulingReason(c.Message)
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("failed: %s %s", p.Status.Reason, firstLine(p.Status.Message))
	}
	return ""
}

var (
	schedulerSummary = regexp.MustCompile(`^(\d+)/(\d+) nodes are available(?:: (.*))?$`)
	schedulerItem    = regexp.MustCompile(`^(\d+) (.*)$`)
)

// SchedulingReason turns the scheduler's message ("0/3 nodes are
// available: 1 node(s) had untolerated taint {gpu: }, 2 Insufficient
// nvidia.com/gpu. preemption: ...") into plain words ("not enough
// nvidia.com/gpu on 2 of 3 nodes; 1 node has a taint the pod does not
// tolerate"). A message it does not know comes back as it is.
func SchedulingReason(msg string) string {
	msg = strings.TrimSpace(msg)
	// The node summary is the first sentence; what follows (preemption,
	// dynamic resource claims) is about what the scheduler tried next.
	if i := strings.Index(msg, ". "); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSuffix(msg, ".")
	m := schedulerSummary.FindStringSubmatch(msg)
	if m == nil {
		if msg == "no nodes available to schedule pods" {
			return "the cluster has no nodes the scheduler can use"
		}
		return msg
	}
	total := m[2]
	if total == "0" || m[3] == "" {
		return "the cluster has no nodes the scheduler can use"
	}
	var parts []string
	for _, item := range strings.Split(m[3], ", ") {
		im := schedulerItem.FindStringSubmatch(strings.TrimSpace(item))
		if im == nil {
			parts = append(parts, item)
			continue
		}
		n, what := im[1], im[2]
		nodes := "nodes"
		if n == "1" {
			nodes = "node"
		}
		switch {
		case strings.HasPrefix(what, "Insufficient "):
			parts = append(parts, fmt.Sprintf("not enough %s on %s of %s nodes", strings.TrimPrefix(what, "Insufficient "), n, total))
		case strings.Contains(what, "untolerated taint"):
			verb := "have a taint"
			if n == "1" {
				verb = "has a taint"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s the pod does not tolerate%s", n, nodes, verb, taintOf(what)))
		case strings.Contains(what, "didn't match Pod's node affinity/selector"):
			parts = append(parts, fmt.Sprintf("%s %s do not match the pod's node selector or affinity", n, nodes))
		case strings.Contains(what, "were unschedulable"), strings.Contains(what, "was unschedulable"):
			parts = append(parts, fmt.Sprintf("%s %s cordoned", n, map[bool]string{true: "node is", false: "nodes are"}[n == "1"]))
		case strings.Contains(what, "didn't match pod topology spread constraints"):
			parts = append(parts, fmt.Sprintf("%s %s would break the pod's topology spread", n, nodes))
		case strings.Contains(what, "Too many pods"):
			parts = append(parts, fmt.Sprintf("%s %s already run as many pods as they allow", n, nodes))
		default:
			parts = append(parts, n+" "+what)
		}
	}
	return strings.Join(parts, "; ")
}

// taintOf extracts " ({key: value})" from the scheduler's taint item.
func taintOf(item string) string {
	i, j := strings.Index(item, "{"), strings.LastIndex(item, "}")
	if i < 0 || j < i {
		return ""
	}
	return " (" + item[i:j+1] + ")"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Explain summarises pods that are not running, grouped by fleet and
// reason: "2 trainer pods Pending: not enough nvidia.com/gpu on 3 of 3
// nodes". Running pods and pods still starting without a problem are
// counted per fleet in the last line.
func Explain(pods []corev1.Pod) []string {
	type key struct{ fleet, phase, problem string }
	problems := map[key][]string{}
	running := map[string]int{}
	starting := map[string]int{}
	for i := range pods {
		p := &pods[i]
		fleet := Fleet(p)
		problem := PodProblem(p)
		switch {
		case problem != "":
			k := key{fleet, string(p.Status.Phase), problem}
			problems[k] = append(problems[k], p.Name)
		case p.Status.Phase == corev1.PodRunning:
			running[fleet]++
		case p.Status.Phase == corev1.PodPending:
			starting[fleet]++
		}
	}
	var out []string
	for k, names := range problems {
		what := "pod"
		if len(names) > 1 {
			what = "pods"
		}
		line := fmt.Sprintf("%d %s %s %s: %s", len(names), k.fleet, what, k.phase, k.problem)
		if len(names) <= 3 {
			sort.Strings(names)
			line += " (" + strings.Join(names, ", ") + ")"
		}
		out = append(out, line)
	}
	sort.Strings(out)
	if len(running)+len(starting) > 0 {
		var counts []string
		for _, fleet := range sortedKeys(running, starting) {
			c := strconv.Itoa(running[fleet]) + " " + fleet + " running"
			if starting[fleet] > 0 {
				c += fmt.Sprintf(", %d starting", starting[fleet])
			}
			counts = append(counts, c)
		}
		out = append(out, strings.Join(counts, "; "))
	}
	return out
}

func sortedKeys(maps ...map[string]int) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
