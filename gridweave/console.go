package gridweave

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
)

// The web console: GET /ui/ serves its page and files (embedded, open
// without credentials: it holds no data), and the page reads and acts
// through the API with the credential a person signs in with. The routes
// here are the reads the console needs beyond the rest of the API: a
// node's audit trail and Kubernetes Node, the KubeTorch jobs, and the
// fleet's recent history.

// nodeAudit answers a node's audit trail, oldest first.
func (nr *nodeRoutes) nodeAudit(r *http.Request, _ noBody) (api.AuditList, error) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		return api.AuditList{}, err
	}
	events, err := nr.keyring.Audit(r.Context(), joinkeys.AuditQuery{Hostname: h, Limit: 500})
	if err != nil {
		return api.AuditList{}, err
	}
	out := api.AuditList{Events: make([]api.AuditEvent, len(events))}
	for i, e := range events {
		out.Events[i] = api.AuditEvent{ID: e.ID, At: e.At, Type: string(e.Type), KeyID: e.KeyID, Actor: e.Actor, Reason: e.Reason}
	}
	return out, nil
}

// nodeKubernetes answers the node's Kubernetes Node: whether it
// exists, whether it is the node's own (its mark), and its conditions.
func (nr *nodeRoutes) nodeKubernetes(r *http.Request, _ noBody) (api.KubernetesNode, error) {
	n, err := nr.pathLedgerNode(r)
	if err != nil {
		return api.KubernetesNode{}, err
	}
	h := n.Hostname
	out := api.KubernetesNode{Hostname: h, Conditions: []api.NodeCondition{}}
	node, err := nr.kube.CoreV1().Nodes().Get(r.Context(), h, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return api.KubernetesNode{}, err
	default:
		out.Exists, out.Unschedulable, out.PodCIDR = true, node.Spec.Unschedulable, node.Spec.PodCIDR
		out.Owned = nr.fleet.Marks().Owns(fleet.KubeNode{Name: node.Name, Labels: node.Labels}, n)
		for _, c := range node.Status.Conditions {
			out.Conditions = append(out.Conditions, api.NodeCondition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
				Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time.UTC()})
		}
	}
	return out, nil
}

// fleetHistory keeps a sample of the fleet a minute for six hours.
type fleetHistory struct {
	sampling sync.Mutex // one sample at a time, in order
	mu       sync.Mutex
	samples  []api.FleetSample
}

const (
	historyEvery = time.Minute
	historyKeep  = 6 * 60
)

// sampleFleet records the fleet now, unless the last sample is younger
// than historyEvery.
func (nr *nodeRoutes) sampleFleet(ctx context.Context) error {
	nr.history.sampling.Lock()
	defer nr.history.sampling.Unlock()
	now := nr.now().UTC()
	nr.history.mu.Lock()
	if n := len(nr.history.samples); n > 0 && now.Sub(nr.history.samples[n-1].At) < historyEvery {
		nr.history.mu.Unlock()
		return nil
	}
	nr.history.mu.Unlock()
	nodes, err := nr.keyring.Nodes(ctx)
	if err != nil {
		return err
	}
	sample := api.FleetSample{At: now, GPUs: map[string]int{}}
	for _, v := range nr.viewNodes(ctx, nodes...) {
		if v.Status != string(joinkeys.StatusRegistered) {
			continue
		}
		sample.Nodes++
		if !v.Online {
			continue
		}
		sample.Online++
		if v.WorkerGroup != nil {
			sample.GPUs[*v.WorkerGroup] += len(v.GPUs)
		}
	}
	nr.history.mu.Lock()
	defer nr.history.mu.Unlock()
	nr.history.samples = append(nr.history.samples, sample)
	if extra := len(nr.history.samples) - historyKeep; extra > 0 {
		nr.history.samples = slices.Delete(nr.history.samples, 0, extra)
	}
	return nil
}

// fleetHistory answers the samples, with one of now when the last is
// older than a minute.
func (nr *nodeRoutes) fleetHistory(r *http.Request, _ noBody) (api.FleetHistory, error) {
	if err := nr.sampleFleet(r.Context()); err != nil {
		return api.FleetHistory{}, err
	}
	nr.history.mu.Lock()
	defer nr.history.mu.Unlock()
	return api.FleetHistory{Samples: slices.Clone(nr.history.samples)}, nil
}
