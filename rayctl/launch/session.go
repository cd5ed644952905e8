package launch

import (
	"fmt"
	"io"
	"net/http"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/manifest/validation"
	"gridweave.dev/rayctl"
)

// Session is one user's connection to one cluster.
type Session struct {
	Kube    kubernetes.Interface
	Ray     rayclient.Interface
	Dynamic dynamic.Interface
	Rayctl  *rayctl.Client
	// Validator lints before anything is applied.
	Validator *validation.Validator
	// Out receives progress lines; Terminal says it is a terminal (a
	// spinner then, plain lines otherwise).
	Out      io.Writer
	Terminal bool
	// Poll is how often a wait looks again; default 2 s.
	Poll time.Duration

	restConfig *rest.Config
	httpClient *http.Client
}

// NewSession connects to the cluster cfg names.
func NewSession(cfg *rest.Config, out io.Writer) (*Session, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := rayctl.New(kube, ray, nil)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("launch: an HTTP client for %s: %w", cfg.Host, err)
	}
	return &Session{Kube: kube, Ray: ray, Dynamic: dyn, Rayctl: rc.WithDynamic(dyn), Validator: validation.NewValidator(),
		Out: out, Poll: 2 * time.Second, restConfig: cfg, httpClient: httpClient}, nil
}

func (s *Session) poll() time.Duration {
	if s.Poll <= 0 {
		return 2 * time.Second
	}
	return s.Poll
}

func (s *Session) say(format string, args ...any) {
	if s.Out != nil {
		fmt.Fprintf(s.Out, format+"\n", args...)
	}
}
