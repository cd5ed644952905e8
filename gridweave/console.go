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
	"gridweave.dev/joinkeys"
)

// The web console: GET /ui/ serves its page and files (embedded, open
// without credentials: it holds no data), and the page reads and acts
// through the API with the credential a person signs in with. The routes
// here are the reads the console needs beyond the rest of the API: a
// node's audit trail and Kubernetes Node, the KubeTorch jobs, and the
// fleet's recent history.

// handleNodeAudit answers a node's audit trail, oldest first.
func (s *Server) handleNodeAudit(w http.ResponseWriter, r *http.Request) {
	h := r.PathValue("hostname")
	if err := joinkeys.ValidateHostname(h); err != nil {
		s.writeError(w, r, err)
		return
	}
	events, err := s.keyring.Audit(r.Context(), joinkeys.AuditQuery{Hostname: h, Limit: 500})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.AuditList{Events: make([]api.AuditEvent, len(events))}
	for i, e := range events {
		out.Events[i] = api.AuditEvent{ID: e.ID, At: e.At, Type: string(e.Type), KeyID: e.KeyID, Actor: e.Actor, Reason: e.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleNodeKubernetes answers the node's Kubernetes Node: whether it
// exists and its conditions.
func (s *Server) handleNodeKubernetes(w http.ResponseWriter, r *http.Request) {
	h, ok := s.pathNode(w, r)
	if !ok {
		return
	}
	out := api.KubernetesNode{Hostname: h, Conditions: []api.NodeCondition{}}
	node, err := s.kube.CoreV1().Nodes().Get(r.Context(), h, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		s.writeError(w, r, err)
		return
	default:
		out.Exists, out.Unschedulable, out.PodCIDR = true, node.Spec.Unschedulable, node.Spec.PodCIDR
		for _, c := range node.Status.Conditions {
			out.Conditions = append(out.Conditions, api.NodeCondition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
				Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time.UTC()})
		}
	}
	writeJSON(w, http.StatusOK, out)
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
func (s *Server) sampleFleet(ctx context.Context) error {
	s.history.sampling.Lock()
	defer s.history.sampling.Unlock()
	now := s.now().UTC()
	s.history.mu.Lock()
	if n := len(s.history.samples); n > 0 && now.Sub(s.history.samples[n-1].At) < historyEvery {
		s.history.mu.Unlock()
		return nil
	}
	s.history.mu.Unlock()
	nodes, err := s.keyring.Nodes(ctx)
	if err != nil {
		return err
	}
	sample := api.FleetSample{At: now, GPUs: map[string]int{}}
	for _, v := range s.viewNodes(ctx, nodes...) {
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
	s.history.mu.Lock()
	defer s.history.mu.Unlock()
	s.history.samples = append(s.history.samples, sample)
	if extra := len(s.history.samples) - historyKeep; extra > 0 {
		s.history.samples = slices.Delete(s.history.samples, 0, extra)
	}
	return nil
}

// handleFleetHistory answers the samples, with one of now when the last
// is older than a minute.
func (s *Server) handleFleetHistory(w http.ResponseWriter, r *http.Request) {
	if err := s.sampleFleet(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.history.mu.Lock()
	out := api.FleetHistory{Samples: slices.Clone(s.history.samples)}
	s.history.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
