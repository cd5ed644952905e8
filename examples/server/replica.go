package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/standby"
)

// With KUBERAY_STORE=kubernetes the server is one of several replicas on
// one ledger: every replica serves the API, and the one holding the Lease
// leaderLease drives what must be single (the WireGuard device, routes,
// the reaper, the worker-group reconciler, scrape targets). What every
// replica must share is in the Secret masterSecret.
const (
	leaderLease  = "gridweave-leader"
	masterSecret = "gridweave-master"
	// hubConfigMap names where nodes reach the leader's device
	// (endpoint) and which replica it is (leader); the leader writes
	// it when it takes the device, every replica answers it.
	hubConfigMap = "gridweave-hub"
	// followEvery is how often the leader brings its device to the
	// ledger, which other replicas write joins to.
	followEvery = 2 * time.Second
)

// The masterSecret's keys.
const (
	secretWireGuardKey = "wireguard.key"
	secretTLSCert      = "tls.crt"
	secretTLSKey       = "tls.key"
	secretJWT          = "jwt-secret"
)

// replica is this server as one of several.
type replica struct {
	identity string
	// namespace holds the replicas' own objects: the Lease, the hub
	// ConfigMap and the identity's Secret (GRIDWEAVE_SYSTEM_NAMESPACE).
	namespace string
	kube      kubernetes.Interface
	store     *kubestore.Store
	mesh      *standby.Mesh
	routes    *standby.Routes
	// hub is the leader's WireGuard endpoint as last read.
	hub atomic.Pointer[string]
}

// Hub is where nodes reach the leader's WireGuard device, as last read
// from the hubConfigMap; until it was read once, it is read now ("" while
// no leader wrote it).
func (r *replica) Hub() string {
	if ep := r.hub.Load(); ep != nil {
		return *ep
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.readHub(ctx)
	if ep := r.hub.Load(); ep != nil {
		return *ep
	}
	return ""
}

func (r *replica) readHub(ctx context.Context) {
	if cm, err := r.kube.CoreV1().ConfigMaps(r.namespace).Get(ctx, hubConfigMap, metav1.GetOptions{}); err == nil {
		ep := cm.Data["endpoint"]
		r.hub.Store(&ep)
	}
}

// followHub reads the hubConfigMap every followEvery until ctx ends.
func (r *replica) followHub(ctx context.Context) {
	tick := time.NewTicker(followEvery)
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

// publishHub writes this replica's endpoint as the hub's.
func (r *replica) publishHub(ctx context.Context, namespace, endpoint string) error {
	cms := r.kube.CoreV1().ConfigMaps(namespace)
	data := map[string]string{"endpoint": endpoint, "leader": r.identity}
	for {
		cm, err := cms.Get(ctx, hubConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: hubConfigMap, Labels: map[string]string{"app.kubernetes.io/part-of": "gridweave"}}, Data: data}, metav1.CreateOptions{FieldManager: "gridweave"})
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
			r.hub.Store(&endpoint)
		}
		return err
	}
}

// openReplica opens the ledger in KUBERAY_NAMESPACE and takes the shared
// identity from the masterSecret (made by the first replica to start, from
// the files beside KUBERAY_DB when a single master is being made HA): the
// WireGuard key and the TLS pair are written beside KUBERAY_DB, where the
// rest of the start reads them, and JWT_SECRET is taken from it unless
// set. installCRDs installs the ledger's CRDs first.
func openReplica(ctx context.Context, cfg *gridweave.Config, getenv func(string) string, installCRDs bool, log *slog.Logger) (*replica, error) {
	rc, err := restConfig(getenv, log)
	if err != nil {
		return nil, err
	}
	if rc == nil {
		return nil, errors.New("KUBERAY_STORE=kubernetes: no Kubernetes API server (set KUBECONFIG, or run in a pod)")
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if installCRDs {
		if err := kubestore.InstallCRDs(ctx, rc); err != nil {
			return nil, err
		}
		log.Info("ledger CRDs installed", "group", kubestore.Group)
	}
	store, err := kubestore.New(rc, cfg.Namespace, nil)
	if err != nil {
		return nil, fmt.Errorf("KUBERAY_NAMESPACE: %w", err)
	}
	if _, err := store.Keys(ctx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("KUBERAY_STORE=kubernetes: the ledger's CRDs (group %s) are not installed: start once with --install-crds, or apply deploy/kubernetes/ha/ledger-crds.yaml", kubestore.Group)
		}
		return nil, fmt.Errorf("KUBERAY_STORE=kubernetes: reading the ledger in namespace %s: %w", cfg.Namespace, err)
	}
	dir := filepath.Dir(cfg.DBPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("KUBERAY_DB: %w", err)
	}
	jwt, err := shareMasterSecret(ctx, kube, *cfg, dir, log)
	if err != nil {
		return nil, err
	}
	if getenv("JWT_SECRET") == "" {
		cfg.JWTSecret = jwt
	}
	key, err := loadOrCreateKey(filepath.Join(dir, secretWireGuardKey))
	if err != nil {
		return nil, err
	}
	pub, err := key.Public()
	if err != nil {
		return nil, err
	}
	identity := getenv("POD_NAME")
	if identity == "" {
		host, _ := os.Hostname()
		identity = host + "-" + randhex.String(4)
	}
	log.Info("ledger: Kubernetes", "namespace", cfg.Namespace, "replica", identity)
	return &replica{identity: identity, namespace: cfg.SystemNamespace, kube: kube, store: store, mesh: standby.New(pub), routes: &standby.Routes{}}, nil
}

// shareMasterSecret makes sure the masterSecret exists and writes its
// WireGuard key and TLS pair into dir; it returns its JWT secret. The
// first replica makes it, from the files in dir when they exist; a replica
// that lost that race takes the winner's.
func shareMasterSecret(ctx context.Context, kube kubernetes.Interface, cfg gridweave.Config, dir string, log *slog.Logger) (string, error) {
	secrets := kube.CoreV1().Secrets(cfg.SystemNamespace)
	s, err := secrets.Get(ctx, masterSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Servers before GRIDWEAVE_SYSTEM_NAMESPACE kept it beside the
		// workloads: a new identity here would strand every joined machine.
		if _, oldErr := kube.CoreV1().Secrets(cfg.Namespace).Get(ctx, masterSecret, metav1.GetOptions{}); oldErr == nil {
			return "", fmt.Errorf("the Secret %s/%s holds this master's identity, where the workloads' editors read it: move it to %s before starting (kubectl -n %s get secret %s -o yaml | sed 's/namespace: %s/namespace: %s/' | kubectl apply -f - && kubectl -n %s delete secret %s)",
				cfg.Namespace, masterSecret, cfg.SystemNamespace, cfg.Namespace, masterSecret, cfg.Namespace, cfg.SystemNamespace, cfg.Namespace, masterSecret)
		}
		made, fresh, makeErr := makeMasterSecret(cfg, dir)
		var refused *gridweave.ConfigError
		if errors.As(makeErr, &refused) {
			for _, path := range fresh {
				_ = os.Remove(path)
			}
			return "", refused
		}
		if makeErr == nil {
			s, err = secrets.Create(ctx, made, metav1.CreateOptions{FieldManager: "gridweave"})
		} else {
			err = makeErr
		}
		if err == nil {
			log.Info("made the Secret every replica shares: the master's WireGuard key, TLS pair and JWT secret", "secret", masterSecret)
		} else {
			// Not ours (another replica made it first) or not made: the
			// files made here for it go, so that the stored Secret's
			// are the ones written below, now or at the next start.
			for _, path := range fresh {
				_ = os.Remove(path)
			}
		}
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, masterSecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return "", fmt.Errorf("the Secret %s/%s: %w", cfg.SystemNamespace, masterSecret, err)
	}
	names := []string{secretWireGuardKey}
	if cfg.UsesTLS() && cfg.TLSCertFile == "" {
		names = append(names, secretTLSCert, secretTLSKey)
	}
	for _, name := range names {
		data, ok := s.Data[name]
		if !ok {
			return "", fmt.Errorf("the Secret %s/%s has no %s: every replica must serve the same one; add it (kubectl -n %s edit secret %s) or delete the Secret so that the first replica makes it again (joined nodes then need new join commands)", cfg.SystemNamespace, masterSecret, name, cfg.SystemNamespace, masterSecret)
		}
		path := filepath.Join(dir, name)
		// A different identity already here (a single master's, say) is
		// never overwritten: which one the fleet keeps is the operator's
		// choice.
		if old, err := os.ReadFile(path); err == nil && !bytes.Equal(bytes.TrimSpace(old), bytes.TrimSpace(data)) {
			return "", fmt.Errorf("%s beside KUBERAY_DB differs from the one in the Secret %s/%s: move it away to take the Secret's (nodes joined with the file's then need new join commands), or migrate this master's ledger and identity with gridweave-server migrate", path, cfg.SystemNamespace, masterSecret)
		}
		if err := writePrivate(path, data); err != nil {
			return "", err
		}
	}
	jwt := string(s.Data[secretJWT])
	if len(jwt) == 0 {
		return "", fmt.Errorf("the Secret %s/%s has no %s", cfg.SystemNamespace, masterSecret, secretJWT)
	}
	if cfg.JWTSecret != "" && cfg.JWTSecret != gridweave.DefaultJWTSecret && cfg.JWTSecret != jwt {
		return "", fmt.Errorf("JWT_SECRET differs from the Secret %s/%s's %s: every replica must verify with the same one; unset JWT_SECRET to use the Secret's", cfg.SystemNamespace, masterSecret, secretJWT)
	}
	return jwt, nil
}

// makeMasterSecret is the masterSecret from the files in dir, each made
// when missing (fresh lists those), and a new JWT secret unless JWT_SECRET
// set one.
func makeMasterSecret(cfg gridweave.Config, dir string) (_ *corev1.Secret, fresh []string, _ error) {
	for _, name := range []string{secretWireGuardKey, secretTLSCert, secretTLSKey} {
		if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			fresh = append(fresh, filepath.Join(dir, name))
		}
	}
	data := map[string][]byte{}
	key, err := loadOrCreateKey(filepath.Join(dir, secretWireGuardKey))
	if err != nil {
		return nil, fresh, err
	}
	data[secretWireGuardKey] = []byte(key.Base64() + "\n")
	if cfg.UsesTLS() && cfg.TLSCertFile == "" {
		addrs := []netip.Addr{cfg.MasterVPNIP}
		for _, a := range []string{cfg.MasterIP, cfg.HubIP} {
			if ip, err := netip.ParseAddr(a); err == nil {
				addrs = append(addrs, ip)
			}
		}
		certFile, keyFile := filepath.Join(dir, secretTLSCert), filepath.Join(dir, secretTLSKey)
		if _, err := tlspin.LoadOrCreate(certFile, keyFile, addrs); err != nil {
			return nil, fresh, err
		}
		for name, path := range map[string]string{secretTLSCert: certFile, secretTLSKey: keyFile} {
			if data[name], err = os.ReadFile(path); err != nil {
				return nil, fresh, err
			}
		}
	}
	jwt := cfg.JWTSecret
	if jwt == "" || jwt == gridweave.DefaultJWTSecret {
		jwt = randhex.String(32)
	} else if err := cfg.CheckJWTSecret(); err != nil {
		// Never stored before it passed: the Secret outlives this start.
		return nil, fresh, err
	}
	data[secretJWT] = []byte(jwt)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: masterSecret, Labels: map[string]string{"app.kubernetes.io/part-of": "gridweave"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}, fresh, nil
}

// writePrivate replaces path with data, readable by its owner only.
func writePrivate(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lead competes for the Lease until ctx ends, and while it holds it drives
// the device: openDevice makes it, the standby mesh and routes hand every
// call to it, the fleet is restored from the ledger and run (reaper,
// reconciler, scrape targets), and the device follows the ledger every
// followEvery. A replica that loses the Lease returns an error (its
// process stops, and a fresh start competes again); on ctx's end it gives
// the Lease up so another replica takes over at once.
func (r *replica) lead(ctx context.Context, cfg gridweave.Config, server *gridweave.Server, openDevice func(ctx context.Context) (device, error), log *slog.Logger) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaderLease, Namespace: cfg.SystemNamespace},
		Client:     r.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: r.identity},
	}
	leading := make(chan error, 1)
	// The elector starts the leading in a goroutine of its own and does
	// not wait for it: once Run returned (done), a leading that had not
	// started yet does not start, and one that had is waited for.
	var gate sync.Mutex
	started, done := false, false
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.LeaseDuration * 2 / 3,
		RetryPeriod:     cfg.LeaseDuration / 7,
		ReleaseOnCancel: true,
		Name:            "gridweave",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				gate.Lock()
				if done {
					gate.Unlock()
					return
				}
				started = true
				gate.Unlock()
				leading <- r.whileLeading(lctx, cfg, server, openDevice, log)
			},
			OnStoppedLeading: func() { log.Info("leader: stopped leading", "replica", r.identity) },
			OnNewLeader: func(id string) {
				if id != r.identity {
					log.Info("leader: another replica leads", "leader", id, "replica", r.identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("LEADER_LEASE_DURATION: %w", err)
	}
	electCtx, stop := context.WithCancel(ctx)
	defer stop()
	go r.followHub(electCtx)
	ran := make(chan struct{})
	go func() { elector.Run(electCtx); close(ran) }()
	select {
	case <-ran:
		// Run does not wait for the leading to end: the device is
		// closed before this returns (and the process exits).
		gate.Lock()
		done = true
		wait := started
		gate.Unlock()
		var leadErr error
		if wait {
			leadErr = <-leading
		}
		if ctx.Err() != nil {
			return leadErr
		}
		return errors.Join(errors.New("leader: lost the Lease; stopping so that a fresh start competes again"), leadErr)
	case err := <-leading:
		// Leading ended on its own (the device failed, or the fleet
		// stopped): give the Lease up and stop.
		stop()
		<-ran
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("leader: %w", err)
	}
}

// device is the leader's WireGuard device: its mesh, its routes (nil for
// an in-memory mesh) and what closes it.
type device struct {
	mesh   mesh.Mesh
	routes fleet.Routes
	close  func() error
}

func (r *replica) whileLeading(ctx context.Context, cfg gridweave.Config, server *gridweave.Server, openDevice func(ctx context.Context) (device, error), log *slog.Logger) error {
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
		if err := r.publishHub(ctx, cfg.SystemNamespace, endpoint); err != nil {
			_ = dev.close()
			return fmt.Errorf("publishing the hub's endpoint in the ConfigMap %s: %w", hubConfigMap, err)
		}
		log.Info("leader: nodes reach the WireGuard device here now", "endpoint", endpoint)
	}
	r.mesh.Attach(dev.mesh)
	r.routes.Attach(dev.routes)
	defer func() {
		r.routes.Attach(nil)
		r.mesh.Detach()
		if err := dev.close(); err != nil {
			log.Warn("leader: closing the WireGuard device", "err", err)
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- server.Run(ctx) }()
	tick := time.NewTicker(followEvery)
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
			// endpoint: followHub read it; write it again.
			if endpoint != "" && r.Hub() != endpoint {
				if err := r.publishHub(ctx, cfg.SystemNamespace, endpoint); err != nil && ctx.Err() == nil {
					log.Warn("leader: publishing the hub's endpoint", "err", err)
				}
			}
		}
	}
}
