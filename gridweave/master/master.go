package master

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/crd"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/identity"
	"gridweave.dev/gridweave/linkbook"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/leaderstore"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/reflexive"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/raymem"
)

// Options are what Run takes beside the configuration.
type Options struct {
	// Kubernetes is the cluster's client configuration (a kubeconfig's,
	// or the pod's in-cluster one). Nil runs an embedded in-memory
	// cluster where the API works and nothing runs (no pods, no Ray, no
	// CRD proxy); the Kubernetes ledger needs a real one.
	Kubernetes *rest.Config
	// Replica names this master among the replicas of a Kubernetes
	// ledger (a pod's name). Default: the host name and a random suffix.
	Replica string
	// InstallCRDs installs (or updates) the GridweaveJob and
	// GridweaveEndpoint CRDs, and the ledger's with the Kubernetes
	// ledger, at start.
	InstallCRDs bool
	// Addr is the public listener's address. Default ":" and cfg.Port;
	// in dev mode "127.0.0.1:" and cfg.Port, as dev mode's secrets are
	// derivable.
	Addr string
	// Agents are join agents built into the program (files named
	// join-node-*), served from the master's directory when
	// cfg.AgentDir names none. Nil: none.
	Agents fs.FS
	// Logger receives the start-up report and the service's log.
	// Default discards.
	Logger *slog.Logger
}

// A SettingError is a start that failed on the value of one setting of
// the configuration: Setting is the gridweave.Config field's name (a
// program maps it to where the value came from, an environment
// variable, say). gridweave.New's refusals are of the same type.
type SettingError = gridweave.SettingError

func settingError(setting string, err error) error {
	if err == nil {
		return nil
	}
	return &SettingError{Setting: setting, Err: err}
}

// Dir is the master's directory: the ledger's (cfg.DBPath's), where the
// identity's files and the served join agents are kept too.
func Dir(cfg gridweave.Config) string { return filepath.Dir(cfg.DBPath) }

// Run is the whole master: it judges cfg (Validate, then Check once the
// JWT secret is known; build cfg from gridweave.DefaultConfig, whose
// values Validate accepts), opens the backends cfg names, says which
// in the log, and serves until ctx ends, then lets in-flight requests
// finish within cfg.ShutdownTimeout. A replica that loses the Lease
// stops too, with an error.
func Run(ctx context.Context, cfg gridweave.Config, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	var ha *replica
	var err error
	if cfg.Store == "kubernetes" {
		// The JWT secret may come from the Secret the replicas share:
		// before Check judges it.
		if ha, err = openReplica(ctx, &cfg, opts.Kubernetes, opts.Replica, Dir(cfg), opts.InstallCRDs, log); err != nil {
			return err
		}
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	if len(cfg.JWTSecret) < joinkeys.MinJWTSecretLen { // dev mode only (Check refused it otherwise)
		sum := sha256.Sum256([]byte(cfg.JWTSecret))
		cfg.JWTSecret = hex.EncodeToString(sum[:]) // the Keyring and the service verify with the same secret
	}
	publicTLS, err := identity.PublicTLS(&cfg, Dir(cfg), log)
	if err != nil && cfg.TLSCertFile != "" {
		return settingError("TLSCertFile", err)
	} else if err != nil {
		return settingError("DBPath", err) // the pair kept beside the ledger
	}
	var channel replicaChannel
	if ha != nil {
		if channel, err = openChannel(cfg, publicTLS); err != nil {
			return err
		}
	}
	store, err := openStore(ctx, cfg, ha, channel, log)
	if err != nil {
		return err
	}
	defer store.Close()
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		return settingError("VPNCIDR", err)
	}
	quarantine := cfg.AddressQuarantine
	if quarantine == 0 {
		quarantine = -1 // none
	}
	keyring, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool, Logger: log, AddressQuarantine: quarantine})
	if err != nil {
		return err
	}
	masterKey, err := identity.WireGuardKey(filepath.Join(Dir(cfg), identity.WireGuardKeyFile))
	if err != nil {
		return err
	}
	var wg mesh.Mesh
	if ha != nil {
		wg = ha.mesh // the leader attaches its device
	} else {
		var closeMesh func() error
		if wg, closeMesh, err = openMesh(ctx, cfg, masterKey, log); err != nil {
			return err
		}
		defer closeMesh()
	}
	kube, ray, dyn, embedded, err := openKubernetes(opts.Kubernetes, log)
	if err != nil {
		return err
	}
	if cfg.RayDashboardURL == "" && dyn != nil {
		// A real cluster: its Ray head's dashboard, reached on the master.
		cfg.RayDashboardURL = "http://" + net.JoinHostPort(cfg.MasterVPNIP.String(), "8265")
		log.Info(cfg.Name("RayDashboardURL")+" is not set: the Ray proxy and KubeTorch use the master's", "url", cfg.RayDashboardURL)
	}
	// The embedded cluster's objects are only this process's, all known
	// to rayctl's types: a change is written whole, without the JSON
	// passes of a patch.
	rc, err := rayctl.New(kube, ray, &rayctl.Options{Namespace: cfg.Namespace, Logger: log, Replace: embedded})
	if err != nil {
		return err
	}
	if opts.InstallCRDs {
		if dyn == nil {
			return errors.New("installing the CRDs needs a Kubernetes API server, not the embedded in-memory cluster")
		}
		if err := crd.Install(ctx, rc.WithDynamic(dyn)); err != nil {
			return err
		}
		log.Info("CRDs installed: gridweavejobs.gridweave.dev, gridweaveendpoints.gridweave.dev")
	}
	switch {
	case cfg.KubeJoinMode == gridweave.JoinModeKubelet:
		if cfg.KubeletCAFile != "" {
			if cfg.KubeletCAPEM, err = os.ReadFile(cfg.KubeletCAFile); err != nil {
				return settingError("KubeletCAFile", err)
			}
		} else if cfg.KubeletCAPEM, err = clusterCA(opts.Kubernetes); err != nil {
			return err
		}
		log.Info("kubelet join mode: machines' kubelets join the API server through their tunnels", "api_server", cfg.KubeletAPIServerURL())
	case cfg.K3sURL == "":
		log.Warn("k3s step off: " + cfg.Name("K3sURL") + " is not set, so validate tells nodes no k3s URL or agent token")
	}
	if cfg.K3sAgentTokenFile != "" {
		raw, err := os.ReadFile(cfg.K3sAgentTokenFile)
		if err != nil {
			return settingError("K3sAgentTokenFile", err)
		}
		cfg.K3sAgentToken = strings.TrimSpace(string(raw))
	}
	var targets fleet.Targets
	if cfg.DCGMTargetsDir == "" {
		log.Warn("DCGM targets off: " + cfg.Name("DCGMTargetsDir") + " is not set, so no Prometheus scrape targets are written for GPU nodes")
	} else {
		dir, err := scrapetargets.New(cfg.DCGMTargetsDir)
		if err != nil {
			return settingError("DCGMTargetsDir", err)
		}
		targets = dir
	}
	if cfg.InternalAddr == "" && cfg.InternalToken == "" {
		log.Warn("internal routes off: neither " + cfg.Name("InternalAddr") + " nor " + cfg.Name("InternalToken") + " is set")
	}
	if err := PlaceAgents(&cfg, opts.Agents, log); err != nil {
		return err
	}
	var routes fleet.Routes
	_, isDevice := wg.(*wgmesh.Mesh)
	if ha != nil {
		routes = ha.routes
		isDevice = cfg.WireGuardInterface != "none"
	}
	if isDevice {
		if ha == nil {
			routes = fleet.DeviceRoutes{Interface: cfg.WireGuardInterface}
		}
		// Joined nodes call the master through their tunnels: plain HTTP
		// on the VPN address, which only WireGuard peers reach.
		cfg.VPNURL = "http://" + net.JoinHostPort(cfg.MasterVPNIP.String(), strconv.Itoa(cfg.VPNHTTPPort))
		stop, err := serveReflexive(cfg.ReflexivePort, log)
		if err != nil {
			// Still named in the directory, as every replica names it:
			// another process (another replica on this host) may answer,
			// and a probe that gets no answer says so.
			log.Warn("reflexive-address service not served here", "setting", cfg.Name("ReflexivePort"), "error", err)
		}
		defer stop()
	} else {
		log.Warn("VPN listener off: the mesh is in memory, so nodes keep calling the public listener after validate")
		cfg.ReflexivePort = 0
	}
	var hub func() string
	if ha != nil {
		hub = ha.Hub
	}
	var links linkbook.Book
	if ha != nil {
		// Every replica shows what the leader's device observed.
		ha.mesh.Observe(&leaderObserver{leader: ha.Leader, client: channel.client, credential: channel.credential, maxAge: time.Second})
		// Every replica answers the leader's link reports.
		if links, err = linkbook.NewFollower(channel.links, linkbook.FollowerOptions{Leader: ha.Leader, Client: channel.client, Credential: channel.credential}); err != nil {
			return err
		}
	}
	var serveWrites *gridweave.ServeChannel
	if ha != nil {
		// The leader makes every replica's writes of Serve's config.
		serveWrites = &gridweave.ServeChannel{Leader: ha.Leader, Client: channel.client, Credential: channel.credential}
	}
	server, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: keyring, Mesh: wg, Ray: rc, Kube: kube, Dynamic: dyn, Routes: routes, Targets: targets, Hub: hub, Links: links, Serve: serveWrites, Logger: log})
	if err != nil {
		return err
	}
	addr := opts.Addr
	switch {
	case addr != "":
	case cfg.Dev:
		addr = "127.0.0.1:" + strconv.Itoa(cfg.Port)
		log.Warn("dev mode listens on loopback only; --addr :PORT opens it to other hosts")
	default:
		addr = ":" + strconv.Itoa(cfg.Port)
	}
	// Bodies are small (MAX_BODY_BYTES): a client that trickles one is cut
	// off; answers (followed logs) are not bounded in time.
	listen := func(addr string, h http.Handler, tlsConfig *tls.Config) *http.Server {
		return &http.Server{Addr: addr, Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	}
	servers := []listener{{server: listen(addr, server.Handler(), publicTLS)}}
	if ha != nil {
		// The others' writes to the ledger and link reports, taken while
		// this replica leads.
		servers = append(servers, listener{server: listen(cfg.ReplicaAddr, channel.handler(ha, server, log), channel.serverTLS)})
	}
	if cfg.InternalAddr != "" {
		servers = append(servers, listener{server: listen(cfg.InternalAddr, server.InternalHandler(), nil)})
	}
	if cfg.VPNURL != "" {
		// Bound before the address exists (the device may come up later,
		// or be re-made): the kernel delivers to it once it does.
		vpnAddr := net.JoinHostPort(cfg.MasterVPNIP.String(), strconv.Itoa(cfg.VPNHTTPPort))
		servers = append(servers, listener{server: listen(vpnAddr, server.VPNHandler(), nil), freebind: true})
	}
	background := make(chan error, 1)
	// A replica that stops leading on its own stops serving too.
	served, stopServing := context.WithCancel(ctx)
	defer stopServing()
	if ha != nil {
		openDevice := func(ctx context.Context) (device, error) {
			m, closeMesh, err := openMesh(ctx, cfg, masterKey, log)
			if err != nil {
				return device{}, err
			}
			var routes fleet.Routes
			if _, ok := m.(*wgmesh.Mesh); ok {
				routes = fleet.DeviceRoutes{Interface: cfg.WireGuardInterface}
			}
			return device{mesh: m, routes: routes, close: closeMesh}, nil
		}
		go func() { background <- ha.lead(served, cfg, server, openDevice, log); stopServing() }()
	} else {
		go func() { background <- server.Run(ctx) }()
	}
	// Every replica writes its minute's counts of rejected attempts, and
	// what it still counts as it stops (the leader also prunes the trail).
	go func() {
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-served.Done():
				return
			case <-tick.C:
				keyring.FlushRejections(served)
			}
		}
	}()
	defer keyring.FlushAllRejections(context.WithoutCancel(ctx))
	err = serve(served, servers, cfg.ShutdownTimeout, log)
	if served.Err() == nil { // a listener failed: stop the background work too
		if ha == nil {
			return err
		}
		// A replica gives up its Lease and closes the device first.
		stopServing()
	}
	return errors.Join(err, <-background)
}

// serveReflexive answers STUN binding requests on UDP port and the next
// (package reflexive) until stop is called; port 0 serves nothing.
func serveReflexive(port int, log *slog.Logger) (stop func(), err error) {
	var conns []net.PacketConn
	stop = func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	if port == 0 {
		return stop, nil
	}
	for _, p := range []int{port, port + 1} {
		c, err := net.ListenPacket("udp", ":"+strconv.Itoa(p))
		if err != nil {
			stop()
			return func() {}, err
		}
		conns = append(conns, c)
		go func() {
			if err := reflexive.Serve(c); err != nil {
				log.Warn("reflexive-address service stopped", "port", p, "error", err)
			}
		}()
	}
	log.Info("reflexive-address service", "ports", []int{port, port + 1})
	return stop, nil
}

// openMesh drives the WireGuard device cfg.WireGuardInterface: an
// existing one is adopted, a missing one made (a kernel link, else
// wireguard-go in this process) with the master's VPN address and brought
// up. Peers kept only in memory are for the interface "none" and for dev
// mode without the device, each said loudly (no tunnel comes up);
// anything else that fails stops the start. The returned close takes a
// made device away.
func openMesh(ctx context.Context, cfg gridweave.Config, key wgkey.PrivateKey, log *slog.Logger) (mesh.Mesh, func() error, error) {
	inMemory := func(why string) (mesh.Mesh, func() error, error) {
		pub, err := key.Public()
		if err != nil {
			return nil, nil, err
		}
		log.Warn("MESH IN MEMORY: "+why+", so peers are only remembered and no tunnel comes up", "interface", cfg.WireGuardInterface)
		m := memmesh.New(pub)
		return m, m.Close, nil
	}
	if cfg.WireGuardInterface == "none" {
		return inMemory(cfg.Name("WireGuardInterface") + "=none")
	}
	if _, err := net.InterfaceByName(cfg.WireGuardInterface); err != nil && cfg.Dev {
		return inMemory("dev mode and no WireGuard device " + cfg.WireGuardInterface)
	}
	dev, err := wgmesh.OpenDevice(ctx, cfg.WireGuardInterface, netip.PrefixFrom(cfg.MasterVPNIP, cfg.VPNCIDR.Bits()), log)
	if err != nil {
		return nil, nil, settingError("WireGuardInterface", fmt.Errorf("%s: %w (none keeps peers in memory, with no tunnel)", cfg.WireGuardInterface, err))
	}
	fail := func(err error) (mesh.Mesh, func() error, error) {
		return nil, nil, errors.Join(settingError("WireGuardInterface", fmt.Errorf("%s: %w", cfg.WireGuardInterface, err)), dev.Close())
	}
	if err := wgmesh.SetPrivateKey(ctx, cfg.WireGuardInterface, key, cfg.WireGuardPort); err != nil {
		return fail(err)
	}
	// A device this process runs is configured in place, not over its
	// socket; the Mesh reads it over the socket as any other.
	client, closeClient := dev.Client(), func() error { return nil }
	if client != nil {
		closeClient = client.Close
	}
	m, err := wgmesh.New(ctx, cfg.WireGuardInterface, &wgmesh.Options{Logger: log, Client: client})
	if err != nil {
		return fail(errors.Join(err, closeClient()))
	}
	log.Info("mesh: WireGuard device", "interface", cfg.WireGuardInterface, "device", string(dev.Kind), "port", cfg.WireGuardPort)
	return m, func() error { return errors.Join(m.Close(), closeClient(), dev.Close()) }, nil
}

// serverRate is rc with a server's request rate unless rc sets one:
// client-go's default (5 requests a second, bursts of 10) would queue the
// joins a replica serves behind one another.
func serverRate(rc *rest.Config) *rest.Config {
	if rc.QPS != 0 || rc.RateLimiter != nil {
		return rc
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 100, 200
	return rc
}

// openKubernetes is the cluster rc configures, else an embedded in-memory
// one (embedded; it has no dynamic client: the CRD proxy is off then).
func openKubernetes(rc *rest.Config, log *slog.Logger) (kube kubernetes.Interface, ray rayclient.Interface, dyn dynamic.Interface, embedded bool, err error) {
	if rc == nil {
		log.Warn("EMBEDDED IN-MEMORY CLUSTER: no KUBECONFIG and not in a pod; the API works but nothing runs (no pods, no Ray)")
		c := raymem.New()
		return c.Kube, c.Ray, nil, true, nil
	}
	log.Info("kubernetes", "host", rc.Host)
	rc = serverRate(rc)
	if kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, nil, nil, false, err
	}
	if ray, err = rayclient.NewForConfig(rc); err != nil {
		return nil, nil, nil, false, err
	}
	if dyn, err = dynamic.NewForConfig(rc); err != nil {
		return nil, nil, nil, false, err
	}
	return kube, ray, dyn, false, nil
}

// clusterCA is the CA rc trusts: the cluster CA the kubelet join mode
// hands machines unless cfg.KubeletCAFile names one.
func clusterCA(rc *rest.Config) ([]byte, error) {
	switch {
	case rc == nil || rc.CAFile == "" && len(rc.CAData) == 0:
		return nil, nil
	case len(rc.CAData) > 0:
		return rc.CAData, nil
	}
	raw, err := os.ReadFile(rc.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA of the Kubernetes client: %w", err)
	}
	return raw, nil
}

// replicaChannel is how a replica reaches the leader: the ledger's writes
// and the agents' link reports go to it, and what its device observed
// comes from it. It is always TLS, whatever the public listener's
// setting: the replicas' credential never crosses the network in clear.
type replicaChannel struct {
	client       *http.Client // pinned to the channel's pair
	ledgerClient *http.Client // the same, for the ledger's calls, which bound their own time
	credential   string       // the replicas' (leaderstore.Credential)
	links        *linkbook.Memory
	// serverTLS serves the channel's pair to a replica that asks for
	// it by name (identity.ChannelServerName), and the public
	// listener's, when it serves one, to replicas of earlier versions.
	serverTLS *tls.Config
}

// openChannel is the channel of a replica of cfg, whose public listener
// serves publicTLS (nil: plain HTTP). A replica pins the channel's pair
// (identity.ChannelPair), and also the public listener's key when it
// serves one (cfg.PublicPin), which a leader of an earlier version
// serves the channel with.
func openChannel(cfg gridweave.Config, publicTLS *tls.Config) (replicaChannel, error) {
	cert, pin, err := identity.ChannelPair(cfg.JWTSecret)
	if err != nil {
		return replicaChannel{}, fmt.Errorf("the replicas' channel's TLS pair: %w", err)
	}
	var also []tlspin.Pin
	if publicTLS != nil {
		public, err := tlspin.Parse(cfg.PublicPin)
		if err != nil {
			return replicaChannel{}, err
		}
		also = append(also, public)
	}
	clientTLS := tlspin.ClientConfig(pin, also...)
	clientTLS.ServerName = identity.ChannelServerName
	// A leader's address that no longer answers (its pod gone) fails the
	// connection in seconds, not at the kernel's SYN retries.
	transport := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext, TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig: clientTLS}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName != identity.ChannelServerName && publicTLS != nil && len(publicTLS.Certificates) > 0 {
			return &publicTLS.Certificates[0], nil
		}
		return &cert, nil
	}}
	return replicaChannel{
		client: &http.Client{Transport: transport, Timeout: time.Minute},
		// The ledger's calls bound themselves: a read two seconds, a
		// write until the leader answers (at most five minutes): a
		// reservation on a slow API server takes minutes, and one given
		// up early is answered as lost while the leader may still undo
		// it.
		ledgerClient: &http.Client{Transport: transport},
		credential:   leaderstore.Credential([]byte(cfg.JWTSecret)),
		links:        new(linkbook.Memory),
		serverTLS:    serverTLS,
	}, nil
}

// handler serves the leader's side of the channel: the ledger's writes
// and fresh reads, the link reports, what the leader's device observed
// and the writes of Ray Serve's config (server's), refused while ha does
// not lead or has not renewed the Lease
// within half its duration (answering).
func (c replicaChannel) handler(ha *replica, server *gridweave.Server, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(leaderstore.PathPrefix, leaderstore.Handler(ha.store, leaderstore.HandlerOptions{Credential: c.credential, Leading: ha.answering, Logger: log}))
	mux.Handle(linkbook.PathPrefix, linkbook.Handler(c.links, linkbook.HandlerOptions{Credential: c.credential, Leading: ha.answering}))
	mux.Handle(gridweave.ServePathPrefix, server.ServeChannelHandler(c.credential, ha.answering))
	mux.Handle(observedPath, observedHandler(ha.mesh, c.credential, ha.answering))
	return mux
}

// openStore opens the ledger cfg.Store names: the replica's, which only
// the leader writes (the others hand it their writes over channel), or
// the SQLite file cfg.DBPath.
func openStore(ctx context.Context, cfg gridweave.Config, ha *replica, channel replicaChannel, log *slog.Logger) (joinkeys.Store, error) {
	if ha != nil {
		return leaderstore.New(ha.store, leaderstore.Options{
			Leader:     ha.Leader,
			Client:     channel.ledgerClient,
			Credential: channel.credential,
			// Through one failover: a new leader takes the Lease within
			// its duration after the last renewal.
			Wait: cfg.LeaseDuration + 5*time.Second,
		})
	}
	if err := os.MkdirAll(Dir(cfg), 0o700); err != nil {
		return nil, settingError("DBPath", err)
	}
	sync := sqlitestore.SyncFull
	if cfg.DBSync == "normal" {
		sync = sqlitestore.SyncNormal
	}
	store, err := sqlitestore.Open(ctx, cfg.DBPath, &sqlitestore.Options{Sync: sync})
	if err != nil {
		return nil, settingError("DBPath", err)
	}
	log.Info("ledger: SQLite", "path", cfg.DBPath, "sync", cfg.DBSync)
	return store, nil
}
