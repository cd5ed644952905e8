package rayctl_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

// TestGroupLogsFollowReportsAnErrorAtOnce: with Follow, one pod whose log
// cannot be read ends the group's stream with that error while another
// pod's stream is still open (it would never end by itself), and the other
// stream is closed. The API server is a stand-in on loopback serving the
// pod list and the two logs.
func TestGroupLogsFollowReportsAnErrorAtOnce(t *testing.T) {
	healthyOpen, healthyClosed := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/ns/pods", func(w http.ResponseWriter, r *http.Request) {
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, name := range []string{"healthy", "broken"} {
			list.Items = append(list.Items, *groupPod("c", "w", name))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /api/v1/namespaces/ns/pods/healthy/log", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "still running\n")
		w.(http.Flusher).Flush()
		close(healthyOpen)
		<-r.Context().Done() // a followed log that never ends
		close(healthyClosed)
	})
	mux.HandleFunc("GET /api/v1/namespaces/ns/pods/broken/log", func(w http.ResponseWriter, r *http.Request) {
		select { // fail while the healthy pod's stream is open
		case <-healthyOpen:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: "kubelet unreachable"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	fakes := rayctltest.New(t, "ns")
	c, err := rayctl.New(kube, fakes.Ray, &rayctl.Options{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.GroupLogs(context.Background(), "", "c", "w", rayctl.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(s)
		done <- err
	}()
	err = within(t, done, "reading a followed group log after one pod's log failed")
	if err == nil || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "kubelet unreachable") {
		t.Fatalf("stream ended with %v, want the error of pod broken", err)
	}
	within(t, func() chan error {
		ch := make(chan error, 1)
		go func() { <-healthyClosed; ch <- nil }()
		return ch
	}(), "the other pod's log stream after the error")
}
