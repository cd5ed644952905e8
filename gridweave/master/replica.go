package master

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/identity"
	"gridweave.dev/gridweave/lease"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/standby"
)

const (
	// LeaderLease is the Lease replicas compete for.
	LeaderLease = "gridweave-leader"
	// HubConfigMap names where nodes reach the leader's device
	// (endpoint) and which replica it is (leader); the leader writes
	// it when it takes the device, every replica answers it.
	HubConfigMap = "gridweave-hub"
	// FollowEvery is how often the leader brings its device to the
	// ledger, which other replicas write joins to.
	FollowEvery = 2 * time.Second
	// LedgerDrainTimeout bounds how long a leader that is stopped waits
	// for its ledger writes under way before it gives the Lease up; a
	// replica's stop takes up to this long, and its Pod's
	// terminationGracePeriodSeconds must be longer.
	LedgerDrainTimeout = 40 * time.Second
)

// replica is this master as one of several.
type replica struct {
	identity string
	// namespace holds the replicas' own objects: the Lease, the hub
	// ConfigMap and the identity's Secret (cfg.SystemNamespace).
	namespace string
	kube      kubernetes.Interface
	store     *kubestore.Store
	mesh      *standby.Mesh
	routes    *standby.Routes
	// hub is the HubConfigMap as last read.
	hub atomic.Pointer[hubRecord]
	// channel is this replica's URL for the ledger's writes (https and
	// cfg.ReplicaAddr); the leader publishes its own.
	channel string
	// leading is set while this replica leads: the ledger's writes are
	// its own to make. renewed is when its last write of the Lease that
	// the API server took was sent (on the monotonic clock: since
	// processStart), renewedWall the same on the wall clock (UnixNano),
	// and duration the Lease's.
	leading     atomic.Bool
	renewed     atomic.Int64
	renewedWall atomic.Int64
	duration    time.Duration
	// readAt is when the HubConfigMap was last read (UnixNano): writes
	// waiting for a leader share one read every refreshEvery.
	readAt atomic.Int64
}

// answering reports whether this replica may answer the other replicas:
// it leads, and renewed the Lease within half its duration. Another
// replica takes the Lease only a whole duration after the last renewal,
// so a leader that stopped (paused, cut off from the API server) and has
// not noticed stops answering, for reads from its memory above all, well
// before anyone else can write. Both clocks must say so: the monotonic
// one, which a step of the wall clock does not move, and the wall clock,
// which a machine's suspension does (Linux's monotonic clock stops while
// it is suspended, and another replica may have led meanwhile).
func (r *replica) answering() bool {
	if !r.leading.Load() {
		return false
	}
	return time.Since(processStart)-time.Duration(r.renewed.Load()) < r.duration/2 &&
		time.Duration(time.Now().UnixNano()-r.renewedWall.Load()) < r.duration/2
}

// renewedAt records a renewal of the Lease sent at sent.
func (r *replica) renewedAt(sent time.Time) {
	r.renewed.Store(int64(sent.Sub(processStart)))
	r.renewedWall.Store(sent.UnixNano())
}

// processStart is what renewal times are counted from: durations between
// two readings of the monotonic clock, which a step of the wall clock
// does not move.
var processStart = time.Now()

// refreshEvery spaces the reads of the HubConfigMap that writes waiting
// for a leader ask for.
const refreshEvery = 200 * time.Millisecond

// hubRecord is what the leader publishes in the HubConfigMap.
type hubRecord struct {
	endpoint string // where nodes reach its WireGuard device
	leader   string // its identity
	channel  string // where it takes the ledger's writes
}

// Hub is where nodes reach the leader's WireGuard device, as last read
// from the HubConfigMap; until it was read once, it is read now ("" while
// no leader wrote it).
func (r *replica) Hub() string {
	if h := r.hub.Load(); h != nil {
		return h.endpoint
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.readHub(ctx)
	if h := r.hub.Load(); h != nil {
		return h.endpoint
	}
	return ""
}

func (r *replica) readHub(ctx context.Context) error {
	r.readAt.Store(time.Now().UnixNano())
	cm, err := r.kube.CoreV1().ConfigMaps(r.namespace).Get(ctx, HubConfigMap, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // no leader published yet
		}
		return err
	}
	r.hub.Store(&hubRecord{endpoint: cm.Data["endpoint"], leader: cm.Data["leader"], channel: cm.Data["replica"]})
	return nil
}

// Leader says where the ledger's writes go (leaderstore.Options.Leader):
// this replica's own Store while it leads, else the channel the leader
// published (read again when refresh asks).
func (r *replica) Leader(ctx context.Context, refresh bool) (leaderstore.Target, error) {
	if r.leading.Load() {
		return leaderstore.Target{Self: true}, nil
	}
	if h := r.hub.Load(); h == nil || refresh && time.Since(time.Unix(0, r.readAt.Load())) >= refreshEvery {
		if err := r.readHub(ctx); err != nil {
			return leaderstore.Target{}, err
		}
	}
	h := r.hub.Load()
	if h == nil || h.leader == r.identity {
		// None published yet, or this replica's own word from before
		// it stopped leading: the next leader publishes.
		return leaderstore.Target{}, nil
	}
	if u, err := url.Parse(h.channel); err != nil || u.Scheme != "https" || u.Host == "" {
		// Whoever may write the ConfigMap does not get the credential
		// in clear: the channel is TLS, pinned to the replicas' pair.
		return leaderstore.Target{}, fmt.Errorf("%w: %s names the leader's channel %q, not an https URL", errChannelRefused, HubConfigMap, h.channel)
	}
	return leaderstore.Target{URL: h.channel}, nil
}

// errChannelRefused is a leader's channel a replica does not call.
var errChannelRefused = errors.New("master: the leader's channel is refused")

// followHub reads the HubConfigMap every FollowEvery until ctx ends.
func (r *replica) followHub(ctx context.Context) {
	tick := time.NewTicker(FollowEvery)
	defer tick.Stop()
	for {
		r.readHub(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// publishHub writes this replica as the leader: its WireGuard endpoint
// (none without a hub address) and its channel for the ledger's writes.
func (r *replica) publishHub(ctx context.Context, endpoint string) error {
	cms := r.kube.CoreV1().ConfigMaps(r.namespace)
	data := map[string]string{"endpoint": endpoint, "leader": r.identity, "replica": r.channel}
	for {
		cm, err := cms.Get(ctx, HubConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: HubConfigMap, Labels: map[string]string{"app.kubernetes.io/part-of": "gridweave"}}, Data: data}, metav1.CreateOptions{FieldManager: "gridweave"})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		} else if err == nil {
			cm.Data = data
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "gridweave"})
			if apierrors.IsConflict(err) {
				continue
			}
		}
		if err == nil {
			r.hub.Store(&hubRecord{endpoint: endpoint, leader: r.identity, channel: r.channel})
		}
		return err
	}
}

// ledgerFence is the fence of cfg's ledger: the Lease replicas compete
// for names its only writer.
func ledgerFence(cfg gridweave.Config) kubestore.Fence {
	return kubestore.Fence{LedgerNamespace: cfg.Namespace, LeaseNamespace: cfg.SystemNamespace, LeaseName: LeaderLease}
}

// openReplica opens the ledger in cfg.Namespace and takes the shared
// identity (package identity): the WireGuard key and the TLS pair are
// written into dir, where the rest of the start reads them, and the JWT
// secret is taken from it unless cfg set one. installCRDs installs the
// ledger's CRDs first.
func openReplica(ctx context.Context, cfg *gridweave.Config, rc *rest.Config, name, dir string, installCRDs bool, log *slog.Logger) (*replica, error) {
	if rc == nil {
		return nil, errors.New("the Kubernetes ledger needs a Kubernetes API server (Options.Kubernetes)")
	}
	kube, err := kubernetes.NewForConfig(serverRate(rc))
	if err != nil {
		return nil, err
	}
	if installCRDs {
		if err := kubestore.InstallCRDs(ctx, rc); err != nil {
			return nil, err
		}
		log.Info("ledger CRDs installed", "group", kubestore.Group)
		if err := kubestore.InstallFence(ctx, rc, ledgerFence(*cfg)); err != nil {
			return nil, err
		}
		log.Info("ledger fence installed: only the holder of the Lease writes the ledger", "policy", kubestore.FencePolicy, "lease", cfg.SystemNamespace+"/"+LeaderLease)
	}
	if name == "" {
		host, _ := os.Hostname()
		name = host + "-" + randhex.String(4)
	}
	// The API server records each writer of an object by its user agent
	// (managedFields): the ledger's objects name the replica that led.
	writer := rest.CopyConfig(rc)
	writer.UserAgent = "gridweave-ledger-" + name
	store, err := kubestore.New(writer, cfg.Namespace, &kubestore.Options{Writer: name})
	if err != nil {
		return nil, settingError("Namespace", err)
	}
	if _, err := store.Keys(ctx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Kubernetes ledger: its CRDs (group %s) are not installed: start once with --install-crds, or apply deploy/kubernetes/ha/ledger-crds.yaml", kubestore.Group)
		}
		return nil, fmt.Errorf("the Kubernetes ledger: reading it in namespace %s: %w", cfg.Namespace, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, settingError("DBPath", err)
	}
	jwt, err := identity.Share(ctx, kube, *cfg, dir, log)
	if err != nil {
		return nil, err
	}
	if cfg.JWTSecret == "" || cfg.JWTSecret == gridweave.DefaultJWTSecret {
		cfg.JWTSecret = jwt
	}
	key, err := identity.WireGuardKey(filepath.Join(dir, identity.WireGuardKeyFile))
	if err != nil {
		return nil, err
	}
	pub, err := key.Public()
	if err != nil {
		return nil, err
	}
	log.Info("ledger: Kubernetes", "namespace", cfg.Namespace, "replica", name)
	return &replica{identity: name, namespace: cfg.SystemNamespace, kube: kube, store: store, mesh: standby.New(pub), routes: &standby.Routes{},
		channel: "https://" + cfg.ReplicaAddr, duration: leaseDuration(cfg.LeaseDuration)}, nil
}

// leaseDuration is the Lease's duration as lease.Run reckons it: whole
// seconds, 15 s unless set.
func leaseDuration(d time.Duration) time.Duration {
	if d == 0 {
		d = 15 * time.Second
	}
	return max(d.Truncate(time.Second), time.Second)
}

// lead competes for the LeaderLease until ctx ends, and while it holds it
// drives the device: openDevice makes it, the standby mesh and routes hand
// every call to it, the fleet is restored from the ledger and run
// (reaper, reconciler, scrape targets), and the device follows the ledger
// every FollowEvery. A replica that loses the Lease returns an error (its
// process stops, and a fresh start competes again); on ctx's end it lets
// its ledger writes under way end, renewing the Lease meanwhile, and gives
// the Lease up so another replica takes over at once, unless some are
// still under way after LedgerDrainTimeout: the Lease then expires, and
// lead returns an error saying so (lease.ErrUnfinished).
func (r *replica) lead(ctx context.Context, cfg gridweave.Config, server *gridweave.Server, openDevice func(ctx context.Context) (device, error), log *slog.Logger) error {
	followed, stop := context.WithCancel(ctx)
	defer stop()
	go r.followHub(followed)
	err := lease.Run(ctx, lease.Options{
		Client:    r.kube.CoordinationV1(),
		Namespace: cfg.SystemNamespace,
		Name:      LeaderLease,
		Identity:  r.identity,
		Duration:  cfg.LeaseDuration,
		Logger:    log,
		Renewed:   r.renewedAt,
	}, func(ctx context.Context) error { return r.whileLeading(ctx, cfg, server, openDevice, log) })
	if errors.Is(err, lease.ErrLost) {
		return fmt.Errorf("leader: %w; stopping so that a fresh start competes again", err)
	}
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}
	return nil
}

// device is the leader's WireGuard device: its mesh, its routes (nil for
// an in-memory mesh) and what closes it.
type device struct {
	mesh   mesh.Mesh
	routes fleet.Routes
	close  func() error
}

func (r *replica) whileLeading(ctx context.Context, cfg gridweave.Config, server *gridweave.Server, openDevice func(ctx context.Context) (device, error), log *slog.Logger) (err error) {
	log.Info("leader: this replica leads; taking the WireGuard device", "replica", r.identity)
	dev, err := openDevice(ctx)
	if err != nil {
		return err
	}
	endpoint := ""
	if hub := cmp.Or(cfg.HubIP, cfg.MasterIP); hub != "" {
		// Nodes learn it from validate and the peer directory, and point
		// their master peer here.
		endpoint = net.JoinHostPort(hub, strconv.Itoa(cfg.WireGuardPort))
	}
	// The ledger's writes are this replica's from now on: its own, and
	// the others' once they read where to send them. The API server
	// takes them once its fence names this replica (the Lease's new
	// holder); from then on it refuses the old leader's.
	if err := r.store.AwaitWrites(ctx); err != nil {
		_ = dev.close()
		return err
	}
	if holds, err := r.store.FenceHolds(ctx); err == nil && !holds {
		log.Warn("LEDGER NOT FENCED: the API server takes ledger writes from any replica, so one that lost the Lease and has not noticed yet still writes; apply deploy/kubernetes/ha/ledger-fence.yaml (or start once with --install-crds); if it is applied: the API server loads a new binding a moment later, the binding must name this ledger's namespace, and an API server that stopped watching the Leases (the fence's last binding went) needs a restart", "policy", kubestore.FencePolicy)
	}
	r.leading.Store(true)
	if err := r.publishHub(ctx, endpoint); err != nil {
		r.leading.Store(false)
		_ = dev.close()
		return fmt.Errorf("publishing the leader in the ConfigMap %s: %w", HubConfigMap, err)
	}
	log.Info("leader: the ledger's writes come here now", "channel", r.channel)
	if endpoint != "" {
		log.Info("leader: nodes reach the WireGuard device here now", "endpoint", endpoint)
	}
	r.mesh.Attach(dev.mesh)
	r.routes.Attach(dev.routes)
	defer func() {
		// The others hand their writes to the next leader from now on;
		// the writes under way here end before the Lease is given up, so
		// that none lands after the next leader read the ledger.
		r.leading.Store(false)
		drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), LedgerDrainTimeout)
		if stopErr := r.store.StopWriting(drain); stopErr != nil {
			// Given up now, the Lease would let the next leader read the
			// ledger before these land: it expires instead, and the fence
			// refuses them once it names the next leader.
			log.Warn("leader: ledger writes still under way; the Lease is kept until it expires", "err", stopErr)
			err = errors.Join(err, fmt.Errorf("%w: %v", lease.ErrUnfinished, stopErr))
		}
		cancel()
		r.routes.Attach(nil)
		r.mesh.Detach()
		if err := dev.close(); err != nil {
			log.Warn("leader: closing the WireGuard device", "err", err)
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- server.Run(ctx) }()
	tick := time.NewTicker(FollowEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-ran:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-tick.C:
			if _, err := server.Fleet().FollowLedger(ctx); err != nil && ctx.Err() == nil {
				log.Warn("leader: following the ledger", "err", err)
			}
			// A deposed leader's late write may have replaced the
			// record: followHub read it; write it again.
			if h := r.hub.Load(); h == nil || *h != (hubRecord{endpoint: endpoint, leader: r.identity, channel: r.channel}) {
				if err := r.publishHub(ctx, endpoint); err != nil && ctx.Err() == nil {
					log.Warn("leader: publishing the hub's endpoint", "err", err)
				}
			}
		}
	}
}
