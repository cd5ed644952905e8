package rayctl

import (
	"errors"
	"log/slog"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/internal/keyedlock"
)

// FieldManager is the server-side-apply field manager of every write.
const FieldManager = "gridweave"

// Options configure a Client; nil means defaults.
type Options struct {
	// Namespace is used when a call names none; default "default".
	Namespace string
	// Logger receives one line per change; default discards.
	Logger *slog.Logger
	// Backoff bounds the retries of a read-modify-write on 409 Conflict:
	// Steps attempts in all, with a wait between attempts that ends early
	// when the call's context does; default DefaultBackoff().
	Backoff *wait.Backoff
	// PollInterval is how often drains re-check; default 250ms.
	PollInterval time.Duration
	// Replace writes a changed RayCluster whole (an Update preconditioned
	// on the resourceVersion read) rather than as a JSON patch of what
	// changed. It is exact only where this package's Go types know every
	// field the objects hold, as in an in-memory cluster (raymem) that
	// only this process writes: on an API server, a field a newer KubeRay
	// added would be dropped. A patch costs several JSON passes over the
	// object, a replace none. Default false: patches.
	Replace bool
}

// Client operates RayClusters, RayJobs and RayServices.
type Client struct {
	kube      kubernetes.Interface
	ray       rayclient.Interface
	namespace string
	log       *slog.Logger
	backoff   wait.Backoff
	poll      time.Duration
	replace   bool
	apply     *applier // set by WithDynamic
	// locks serialises this Client's read-modify-writes of one RayCluster,
	// so that its own callers do not race each other into conflicts; other
	// writers are handled by retrying on 409.
	locks *keyedlock.Locks
}

// DefaultBackoff returns the retry schedule on conflicts that a Client
// uses unless Options.Backoff is given: 10 attempts, waiting from 10ms,
// doubling, with jitter, at most 2s between attempts.
func DefaultBackoff() wait.Backoff {
	return wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 2 * time.Second}
}

// New returns a Client over the two clientsets.
func New(kube kubernetes.Interface, ray rayclient.Interface, opts *Options) (*Client, error) {
	if kube == nil || ray == nil {
		return nil, errors.New("rayctl: both a kubernetes and a KubeRay clientset are required")
	}
	if opts == nil {
		opts = &Options{}
	}
	c := &Client{kube: kube, ray: ray, namespace: opts.Namespace, log: opts.Logger, backoff: DefaultBackoff(), poll: opts.PollInterval, replace: opts.Replace, locks: new(keyedlock.Locks)}
	if c.namespace == "" {
		c.namespace = "default"
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff != nil {
		c.backoff = *opts.Backoff
	}
	if c.poll == 0 {
		c.poll = 250 * time.Millisecond
	}
	return c, nil
}

// Namespace returns the default namespace.
func (c *Client) Namespace() string { return c.namespace }

func (c *Client) ns(namespace string) string {
	if namespace == "" {
		return c.namespace
	}
	return namespace
}
