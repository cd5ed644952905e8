package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/crd"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/raymem"
)

// builtVersion is the version a release build stamps in (make
// server-static: -X main.builtVersion=...); SERVER_VERSION overrides it.
var builtVersion = ""

// run is the whole program; main only gives it the process's context,
// arguments, environment and output, so tests run it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "backup" || args[0] == "restore") {
		return backupOrRestore(ctx, args[0], args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "migrate" {
		return migrate(ctx, args[1:], getenv, stdout, stderr)
	}
	flags := flag.NewFlagSet("server", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dev := flags.Bool("dev", false, "allow unsafe defaults (default JWT secret, generated admin token); also GRIDWEAVE_DEV=1")
	addr := flags.String("addr", "", "listen address of the public listener (default :KUBERAY_PORT; in dev mode 127.0.0.1:KUBERAY_PORT)")
	version := flags.Bool("version", false, "print SERVER_VERSION and exit")
	installCRDs := flags.Bool("install-crds", false, "install (or update) the GridweaveJob and GridweaveEndpoint CRDs at start")
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := gridweave.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	if getenv("SERVER_VERSION") == "" && builtVersion != "" {
		cfg.ServerVersion = builtVersion
	}
	if *version {
		fmt.Fprintln(stdout, cfg.ServerVersion)
		return nil
	}
	cfg.Dev = cfg.Dev || *dev
	log := slog.New(gridweave.LogHandler(slog.NewJSONHandler(stderr, nil)))
	if cfg.Dev {
		log.Warn("DEV MODE: unsafe defaults are allowed; never run a real master like this")
		if cfg.AdminToken == "" {
			cfg.AdminToken = randhex.String(24)
			fmt.Fprintf(stdout, "dev mode: the admin token of this run is %s\n", cfg.AdminToken)
		}
	}
	var ha *replica
	if cfg.Store == "kubernetes" {
		// The JWT secret may come from the Secret the replicas share:
		// before Check judges it.
		if ha, err = openReplica(ctx, &cfg, getenv, *installCRDs, log); err != nil {
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
	secret := []byte(cfg.JWTSecret)

	store, err := openStore(ctx, cfg, ha, log)
	if err != nil {
		return err
	}
	defer store.Close()
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		return fmt.Errorf("VPN_CIDR: %w", err)
	}
	quarantine := cfg.AddressQuarantine
	if quarantine == 0 {
		quarantine = -1 // ADDRESS_QUARANTINE=0s: none
	}
	keyring, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: secret, Pool: pool, Logger: log, AddressQuarantine: quarantine})
	if err != nil {
		return err
	}
	masterKey, err := loadOrCreateKey(filepath.Join(filepath.Dir(cfg.DBPath), "wireguard.key"))
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
	kube, ray, dyn, embedded, err := openKubernetes(getenv, cfg.Namespace, log)
	if err != nil {
		return err
	}
	if cfg.RayDashboardURL == "" && dyn != nil {
		// A real cluster: its Ray head's dashboard, reached on the master.
		cfg.RayDashboardURL = "http://" + net.JoinHostPort(cfg.MasterVPNIP.String(), "8265")
		log.Info("RAY_DASHBOARD_URL is not set: the Ray proxy and KubeTorch use the master's", "url", cfg.RayDashboardURL)
	}
	// The embedded cluster's objects are only this process's, all known
	// to rayctl's types: a change is written whole, without the JSON
	// passes of a patch.
	rc, err := rayctl.New(kube, ray, &rayctl.Options{Namespace: cfg.Namespace, Logger: log, Replace: embedded})
	if err != nil {
		return err
	}
	if *installCRDs {
		if dyn == nil {
			return errors.New("--install-crds needs a Kubernetes API server (KUBECONFIG or in-cluster), not the embedded in-memory cluster")
		}
		if err := crd.Install(ctx, rc.WithDynamic(dyn)); err != nil {
			return err
		}
		log.Info("CRDs installed: gridweavejobs.gridweave.dev, gridweaveendpoints.gridweave.dev")
	}
	switch {
	case cfg.KubeJoinMode == gridweave.JoinModeKubelet:
		if cfg.KubeletCAFile == "" {
			if cfg.KubeletCAPEM, err = clusterCA(getenv, log); err != nil {
				return err
			}
		}
		log.Info("kubelet join mode: machines' kubelets join the API server through their tunnels", "api_server", cfg.KubeletAPIServer)
	case cfg.K3sURL == "":
		log.Warn("k3s step off: K3S_URL is not set, so validate tells nodes no k3s URL or agent token")
	}
	if cfg.DCGMTargetsDir == "" {
		log.Warn("DCGM targets off: DCGM_TARGETS_DIR is not set, so no Prometheus scrape targets are written for GPU nodes")
	}
	if cfg.InternalAddr == "" && cfg.InternalToken == "" {
		log.Warn("internal routes off: neither INTERNAL_ADDR nor INTERNAL_TOKEN is set")
	}
	if err := placeAgents(&cfg, embeddedAgents(), log); err != nil {
		return err
	}
	publicTLS, err := publicCertificate(&cfg, log)
	if err != nil {
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
	} else {
		log.Warn("VPN listener off: the mesh is in memory, so nodes keep calling the public listener after validate")
	}
	var hub func() string
	if ha != nil {
		hub = ha.Hub
	}
	server, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: keyring, Mesh: wg, Ray: rc, Kube: kube, Dynamic: dyn, Routes: routes, Hub: hub, Logger: log})
	if err != nil {
		return err
	}
	switch {
	case *addr != "":
	case cfg.Dev:
		// Dev mode's secrets are derivable: only this host may call it,
		// unless --addr says otherwise.
		*addr = "127.0.0.1:" + strconv.Itoa(cfg.Port)
		log.Warn("dev mode listens on loopback only; --addr :PORT opens it to other hosts")
	default:
		*addr = ":" + strconv.Itoa(cfg.Port)
	}
	// Bodies are small (MAX_BODY_BYTES): a client that trickles one is cut
	// off; answers (followed logs) are not bounded in time.
	listen := func(addr string, h http.Handler, tlsConfig *tls.Config) *http.Server {
		return &http.Server{Addr: addr, Handler: h, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	}
	servers := []listener{{server: listen(*addr, server.Handler(), publicTLS)}}
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

// listener is one of the server's listeners; freebind binds its address
// even while no interface holds it.
type listener struct {
	server   *http.Server
	freebind bool
}

// serve runs the listeners until ctx ends (SIGTERM), then lets in-flight
// requests finish within timeout.
func serve(ctx context.Context, listeners []listener, timeout time.Duration, log *slog.Logger) error {
	errc := make(chan error, len(listeners))
	var servers []*http.Server
	for _, l := range listeners {
		s := l.server
		ln, err := listenTCP(ctx, s.Addr, l.freebind)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		if s.TLSConfig != nil {
			log.Info("listening (HTTPS)", "addr", ln.Addr().String())
			go func() { errc <- s.ServeTLS(ln, "", "") }()
			continue
		}
		log.Info("listening", "addr", ln.Addr().String())
		go func() { errc <- s.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", timeout)
	stop, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Shutdown(stop))
	}
	return errors.Join(errs...)
}

// placeAgents serves the join agents built into the binary (make
// server-static) when AGENT_DIR does not name others: they are written
// beside the ledger (agents/, only what changed) and served from there.
func placeAgents(cfg *gridweave.Config, embedded fs.FS, log *slog.Logger) error {
	switch {
	case cfg.AgentDir != "":
		log.Info("join agents: AGENT_DIR", "dir", cfg.AgentDir)
		return nil
	case embedded == nil:
		log.Warn("no join agents: this binary was built without them (make server-static embeds them) and AGENT_DIR is not set, so the join command cannot fetch one")
		return nil
	}
	dir := filepath.Join(filepath.Dir(cfg.DBPath), "agents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the join agents: %w", err)
	}
	names, err := fs.Glob(embedded, "join-node-*")
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := fs.ReadFile(embedded, name)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o755); err != nil {
			return fmt.Errorf("the join agents: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("the join agents: %w", err)
		}
	}
	cfg.AgentDir = dir
	log.Info("join agents: built into this binary", "dir", dir, "agents", fmt.Sprint(names))
	return nil
}

// publicCertificate loads the public listener's certificate (TLS_CERT_FILE
// and TLS_KEY_FILE, or the pair kept beside the ledger, made at first
// start) and sets cfg.PublicPin, which the join command carries. With
// TLS off it returns nil and says how exposed that is.
func publicCertificate(cfg *gridweave.Config, log *slog.Logger) (*tls.Config, error) {
	if !cfg.UsesTLS() {
		if !cfg.Dev {
			log.Warn("INSECURE: TLS=off, so the public listener and the join command are plain HTTP: anyone on the path between a machine and this master can replace the agent it runs as root; use this only behind a TLS-terminating proxy the machines trust")
		}
		return nil, nil
	}
	addrs := []netip.Addr{cfg.MasterVPNIP}
	if ip, err := netip.ParseAddr(cfg.MasterIP); err == nil {
		addrs = append(addrs, ip)
	}
	var kp tlspin.KeyPair
	var err error
	if cfg.TLSCertFile != "" {
		if kp, err = tlspin.Load(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("TLS_CERT_FILE: %w", err)
		}
		log.Info("tls: certificate from TLS_CERT_FILE", "cert", cfg.TLSCertFile)
	} else {
		dir := filepath.Dir(cfg.DBPath)
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		if kp, err = tlspin.LoadOrCreate(certFile, keyFile, addrs); err != nil {
			return nil, fmt.Errorf("TLS: the certificate kept beside KUBERAY_DB: %w", err)
		}
		if kp.Created {
			log.Info("tls: made a self-signed certificate for the public listener; join commands pin its key", "cert", certFile, "key", keyFile)
		}
		if len(kp.Missing) > 0 {
			log.Warn("tls: the kept certificate does not name these addresses (pinned joins still work; clients that check names do not); remove both files to make a new pair, after which earlier join commands stop working", "missing", fmt.Sprint(kp.Missing), "cert", certFile)
		}
	}
	cfg.PublicPin = kp.Pin.String()
	log.Info("tls: public listener serves HTTPS", "pin", cfg.PublicPin)
	return &tls.Config{Certificates: []tls.Certificate{kp.Certificate}, MinVersion: tls.VersionTLS12}, nil
}

// loadOrCreateKey reads the master's WireGuard private key, or makes one
// and keeps it (0600) for the next start.
func loadOrCreateKey(path string) (wgkey.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		return wgkey.ParsePrivate(string(trimSpace(raw)))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return wgkey.PrivateKey{}, err
	}
	key, err := wgkey.GeneratePrivate()
	if err != nil {
		return wgkey.PrivateKey{}, err
	}
	if err := os.WriteFile(path, []byte(key.Base64()+"\n"), 0o600); err != nil {
		return wgkey.PrivateKey{}, err
	}
	return key, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// openMesh drives the WireGuard device WG_INTERFACE: an existing one is
// adopted, a missing one made (a kernel link, else wireguard-go in this
// process) with MASTER_VPN_IP and brought up. Peers kept only in memory
// are for WG_INTERFACE=none and for dev mode without the device, each
// said loudly (no tunnel comes up); anything else that fails stops the
// start. The returned close takes a made device away.
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
		return inMemory("WG_INTERFACE=none")
	}
	if _, err := net.InterfaceByName(cfg.WireGuardInterface); err != nil && cfg.Dev {
		return inMemory("dev mode and no WireGuard device " + cfg.WireGuardInterface)
	}
	dev, err := wgmesh.OpenDevice(ctx, cfg.WireGuardInterface, netip.PrefixFrom(cfg.MasterVPNIP, cfg.VPNCIDR.Bits()), log)
	if err != nil {
		return nil, nil, fmt.Errorf("WG_INTERFACE %s: %w (WG_INTERFACE=none keeps peers in memory, with no tunnel)", cfg.WireGuardInterface, err)
	}
	fail := func(err error) (mesh.Mesh, func() error, error) {
		return nil, nil, errors.Join(fmt.Errorf("WG_INTERFACE %s: %w", cfg.WireGuardInterface, err), dev.Close())
	}
	if err := wgmesh.SetPrivateKey(ctx, cfg.WireGuardInterface, key, cfg.WireGuardPort); err != nil {
		return fail(err)
	}
	m, err := wgmesh.New(ctx, cfg.WireGuardInterface, &wgmesh.Options{Logger: log})
	if err != nil {
		return fail(err)
	}
	log.Info("mesh: WireGuard device", "interface", cfg.WireGuardInterface, "device", string(dev.Kind), "port", cfg.WireGuardPort)
	return m, func() error { return errors.Join(m.Close(), dev.Close()) }, nil
}

// openKubernetes uses KUBECONFIG, else the in-cluster config, else an
// embedded in-memory cluster (embedded; it has no dynamic client: the CRD
// proxy is off then).
func openKubernetes(getenv func(string) string, namespace string, log *slog.Logger) (kube kubernetes.Interface, ray rayclient.Interface, dyn dynamic.Interface, embedded bool, err error) {
	rc, err := restConfig(getenv, log)
	if err != nil {
		return nil, nil, nil, false, err
	}
	if rc == nil {
		log.Warn("EMBEDDED IN-MEMORY CLUSTER: no KUBECONFIG and not in a pod; the API works but nothing runs (no pods, no Ray)")
		c := raymem.New()
		return c.Kube, c.Ray, nil, true, nil
	}
	kube, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, false, err
	}
	ray, err = rayclient.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, false, err
	}
	dyn, err = dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, false, err
	}
	return kube, ray, dyn, false, nil
}

// clusterCA is the CA the server's own Kubernetes client trusts: the
// cluster CA the kubelet join mode hands machines unless KUBELET_CA_FILE
// names one.
func clusterCA(getenv func(string) string, log *slog.Logger) ([]byte, error) {
	rc, err := restConfig(getenv, log)
	if err != nil || rc == nil {
		return nil, err
	}
	if len(rc.CAData) > 0 {
		return rc.CAData, nil
	}
	if rc.CAFile == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(rc.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA of the Kubernetes client: %w", err)
	}
	return raw, nil
}

// restConfig is KUBECONFIG's, else the in-cluster one, else nil.
func restConfig(getenv func(string) string, log *slog.Logger) (*rest.Config, error) {
	if path := getenv("KUBECONFIG"); path != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
		log.Info("kubernetes: kubeconfig", "path", path, "host", rc.Host)
		return rc, nil
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		log.Info("kubernetes: in-cluster config", "host", rc.Host)
		return rc, nil
	}
	return nil, nil
}

// openStore opens the ledger KUBERAY_STORE names: the replica's, or the
// SQLite file KUBERAY_DB.
func openStore(ctx context.Context, cfg gridweave.Config, ha *replica, log *slog.Logger) (joinkeys.Store, error) {
	if ha != nil {
		return ha.store, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
		return nil, fmt.Errorf("KUBERAY_DB: %w", err)
	}
	sync := sqlitestore.SyncFull
	if cfg.DBSync == "normal" {
		sync = sqlitestore.SyncNormal
	}
	store, err := sqlitestore.Open(ctx, cfg.DBPath, &sqlitestore.Options{Sync: sync})
	if err != nil {
		return nil, fmt.Errorf("KUBERAY_DB: %w", err)
	}
	log.Info("ledger: SQLite", "path", cfg.DBPath, "sync", cfg.DBSync)
	return store, nil
}

// masterKeyFiles are the master's identity kept beside the ledger: its
// WireGuard key (every node's tunnel names its public key) and the public
// listener's generated certificate (every join command pins it). A
// backup carries them as FILE.<name>, a restore puts them back, so a
// master restored elsewhere keeps its tunnels and join commands; without
// them it makes new ones at start, and every node must join again.
var masterKeyFiles = []string{"wireguard.key", "tls.crt", "tls.key"}

// copyKeyFile copies a key file (0600) when from exists; exclusive
// refuses a to that exists (a backup never overwrites), else to is
// replaced whole.
func copyKeyFile(from, to string, exclusive bool) error {
	data, err := os.ReadFile(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if exclusive {
		f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	tmp := to + ".restoring"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// backupOrRestore is `server backup --to FILE` (online, while the server
// runs: SQLite's backup API) and `server restore --from FILE` (the server
// stopped), both on the ledger KUBERAY_DB names.
func backupOrRestore(ctx context.Context, command string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("server "+command, flag.ContinueOnError)
	flags.SetOutput(stderr)
	to := flags.String("to", "", "backup: the new file to write (must not exist)")
	from := flags.String("from", "", "restore: the backup to restore (stop the server first)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	cfg, err := gridweave.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	switch {
	case command == "backup" && *to != "":
		for _, name := range masterKeyFiles { // refused before anything is written
			if _, err := os.Stat(*to + "." + name); err == nil {
				return fmt.Errorf("server backup: %s exists; choose a new --to", *to+"."+name)
			}
		}
		if err := sqlitestore.Backup(ctx, cfg.DBPath, *to); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "backed up %s to %s\n", cfg.DBPath, *to)
		for _, name := range masterKeyFiles {
			from := filepath.Join(filepath.Dir(cfg.DBPath), name)
			if err := copyKeyFile(from, *to+"."+name, true); err != nil {
				return err
			}
			if _, err := os.Stat(*to + "." + name); err == nil {
				fmt.Fprintf(stdout, "backed up %s to %s\n", from, *to+"."+name)
			}
		}
	case command == "restore" && *from != "":
		if err := sqlitestore.Restore(ctx, *from, cfg.DBPath); err != nil {
			return err
		}
		for _, name := range masterKeyFiles {
			to := filepath.Join(filepath.Dir(cfg.DBPath), name)
			if err := copyKeyFile(*from+"."+name, to, false); err != nil {
				return err
			}
			if _, err := os.Stat(*from + "." + name); err == nil {
				fmt.Fprintf(stdout, "restored %s from %s\n", to, *from+"."+name)
			} else {
				fmt.Fprintf(stdout, "the backup holds no %s: the master keeps %s as it is (made at start when missing)\n", name, to)
			}
		}
		fmt.Fprintf(stdout, "restored %s from %s; start the server\n", cfg.DBPath, *from)
	case command == "backup":
		return errors.New("server backup: --to FILE is required")
	default:
		return errors.New("server restore: --from FILE is required")
	}
	return nil
}
