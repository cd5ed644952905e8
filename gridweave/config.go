package gridweave

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
)

// DefaultJWTSecret is the documented placeholder secret. The server refuses it
// outside dev mode.
const DefaultJWTSecret = "dev-secret-change-me"

// Config is the service's configuration. ConfigFromEnv fills it from the
// environment with the documented names and defaults; a program that
// embeds the service may fill it by hand.
type Config struct {
	// Port is the public listener's port (KUBERAY_PORT, 8800); it also goes
	// into the join command.
	Port int
	// DBPath is the SQLite ledger (KUBERAY_DB, /data/kuberay.db).
	DBPath string
	// DBSync is "normal" (a commit survives a crash of the process; the
	// last commits before a loss of power may roll back, never corrupting
	// the ledger; twice the join rate) or "full" (every commit synced to
	// disk) (KUBERAY_DB_SYNC, normal). A node whose last join rolled back
	// is refused with 401 on its next re-join and joins again with its key.
	DBSync string
	// Store is where the ledger lives (KUBERAY_STORE, sqlite): "sqlite",
	// the file KUBERAY_DB on this host, or "kubernetes", objects in
	// KUBERAY_NAMESPACE of the cluster, which several server replicas can
	// share (one of them, elected on a Lease, drives the WireGuard
	// device).
	Store string
	// HubIP is where nodes reach this replica's WireGuard device while it
	// leads (HUB_IP, default MASTER_IP): with KUBERAY_STORE=kubernetes the
	// leader publishes HUB_IP:WG_PORT and every replica answers it, while
	// MASTER_IP is the replicas' stable address in join commands.
	HubIP string
	// LeaseDuration is how long a leader's Lease holds without renewal
	// (LEADER_LEASE_DURATION, 15s): after a leader dies, another replica
	// takes over within it. Only with KUBERAY_STORE=kubernetes.
	LeaseDuration time.Duration
	// Namespace holds the RayClusters (KUBERAY_NAMESPACE, gridweave).
	Namespace string
	// SystemNamespace holds the master's own objects with several
	// replicas (GRIDWEAVE_SYSTEM_NAMESPACE, gridweave-system): the Secret
	// of its identity (WireGuard key, TLS pair, JWT secret), the leader's
	// Lease and the hub ConfigMap. It must not be Namespace, where the
	// workloads' editors read Secrets.
	SystemNamespace string
	// AdminToken is the admin bearer token (ADMIN_TOKEN).
	AdminToken string
	// JWTSecret signs provider keys and verifies admin, user and provider
	// JWTs (JWT_SECRET).
	JWTSecret string
	// ServerVersion is the master's version for the worker version gate
	// (SERVER_VERSION, 0.0.0).
	ServerVersion string
	// RayImage is the head's image (RAY_IMAGE); RayImageWorker the GPU
	// workers' (RAY_IMAGE_WORKER). Ray refuses a node whose Python
	// differs from the head's (to the minor release with the worker
	// image's RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor): the defaults
	// are a pair, Ray 2.54.0 on Python 3.11 (the worker image
	// deploy/rayimage builds).
	RayImage       string
	RayImageWorker string
	// ClusterName is the RayCluster GPU nodes join (CLUSTER_NAME).
	ClusterName string
	// MasterIP is the master's public address, in the join command and the
	// WireGuard endpoint (MASTER_IP); empty means the join command names a
	// placeholder.
	MasterIP string
	// MasterVPNIP is the master's WireGuard address (MASTER_VPN_IP,
	// 10.100.0.1) inside VPNCIDR (VPN_CIDR, 10.100.0.0/16).
	MasterVPNIP netip.Addr
	VPNCIDR     netip.Prefix
	// ServiceCIDR is the cluster's Service address range (SERVICE_CIDR,
	// 10.43.0.0/16, k3s's default --service-cidr): with MASTER_IP and the
	// pod CIDRs and addresses of the cluster's other Nodes, no node's pod
	// CIDR may overlap it, so none can be routed into a tunnel.
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the cluster's pod range (CLUSTER_CIDR, 10.42.0.0/16,
	// k3s's default --cluster-cidr) and NodeCIDRMaskBits the length of a
	// node's pod CIDR in it (NODE_CIDR_MASK, 24): a Node's pod CIDR is
	// recorded, routed into the tunnels and allowed into its peer only
	// inside it, on the master and on every machine. It must not overlap
	// VPN_CIDR or SERVICE_CIDR.
	ClusterCIDR      netip.Prefix
	NodeCIDRMaskBits int
	// WireGuardInterface and WireGuardPort are the master's device
	// (WG_INTERFACE, wg0; WG_PORT, 51820).
	WireGuardInterface string
	WireGuardPort      int
	// RayDashboardURL is where the Ray proxy and KubeTorch reach the Ray
	// dashboard (RAY_DASHBOARD_URL); the server program defaults it to
	// http://MASTER_VPN_IP:8265 against a real cluster. Empty: /v1/ray
	// and KubeTorch training answer 503.
	RayDashboardURL string
	// KubeTorchDir keeps the code bundles (KUBETORCH_DIR, default
	// "bundles" beside KUBERAY_DB); KubeTorchMaxBundle bounds an upload
	// (KUBETORCH_MAX_BUNDLE_BYTES, default 256 MiB); KubeTorchBaseURL is
	// where Ray workers fetch bundles (KUBETORCH_BASE_URL, default
	// http://MASTER_VPN_IP:VPN_HTTP_PORT, the VPN listener).
	KubeTorchDir       string
	KubeTorchMaxBundle int64
	KubeTorchBaseURL   string
	// KubeTorchLimits bound what a bundle expands to
	// (KUBETORCH_MAX_EXPANDED_BYTES, default 512 MiB;
	// KUBETORCH_MAX_ENTRIES, 10000; KUBETORCH_MAX_RATIO, 100).
	KubeTorchMaxExpanded int64
	// KubeTorchSyncInterval is how often Run brings unfinished KubeTorch
	// jobs' GridweaveJob status in step with Ray (default 10s).
	KubeTorchSyncInterval time.Duration
	KubeTorchMaxEntries   int
	KubeTorchMaxRatio     int
	// RayDashboardTimeout bounds each call of the Ray proxy
	// (RAY_DASHBOARD_TIMEOUT, default 15s): a slower dashboard is a 504.
	RayDashboardTimeout time.Duration
	// CORSOrigins are the origins granted cross-origin access (CORS_ORIGINS,
	// "*"; comma-separated).
	CORSOrigins []string
	// RateLimitPerMinute is the per-client-IP request budget
	// (RATE_LIMIT_PER_MINUTE, 6000).
	RateLimitPerMinute int
	// K3sURL and K3sAgentToken tell nodes how to join k3s (K3S_URL, and
	// the token in the file K3S_AGENT_TOKEN_FILE names, K3sAgentTokenFile,
	// which the program reads into K3sAgentToken: master.Run does); empty
	// means the k3s step is off.
	K3sURL            string
	K3sAgentToken     string
	K3sAgentTokenFile string
	// KubeJoinMode is how a machine's Node joins the cluster
	// (KUBE_JOIN_MODE): "k3s" (the default; K3S_URL and the k3s agent) or
	// "kubelet" (any conformant control plane: the machine's own kubelet,
	// TLS-bootstrapped with a token validate makes for it).
	KubeJoinMode string
	// The kubelet join mode: KubeletAPIServer is the API server's URL
	// through the tunnel (KUBELET_API_SERVER, default
	// https://MASTER_VPN_IP:6443); KubeletCAPEM the cluster CA (read from
	// KUBELET_CA_FILE, else the CA the server's own Kubernetes client
	// trusts, which the program sets); KubeletTLSServerName the name the
	// API server's certificate is checked against when it does not name
	// that address (KUBELET_TLS_SERVER_NAME); KubeletBinary the kubelet
	// served to machines (KUBELET_BINARY, /usr/bin/kubelet); KubeletTokenTTL
	// a bootstrap token's life (KUBELET_TOKEN_TTL, 30m); KubeletDrainTimeout
	// how long a disconnect waits for the evicted pods of the machine's
	// Node before it deletes the Node (KUBELET_DRAIN_TIMEOUT, 20s, under
	// the 30 s a join agent waits for its leave's answer at the public
	// URL; 0s deletes it undrained).
	KubeletAPIServer     string
	KubeletCAFile        string
	KubeletCAPEM         []byte
	KubeletTLSServerName string
	KubeletBinary        string
	KubeletTokenTTL      time.Duration
	KubeletDrainTimeout  time.Duration
	// KubeletClusterDNS is the cluster's DNS the machines' pods resolve
	// with (CLUSTER_DNS; none by default: pods get their machine's
	// resolver): MASTER_VPN_IP, the one address of the tunnels' ranges no
	// machine can hold (a machine of this mode runs no kube-proxy, so a
	// Service's cluster IP does not answer); ClusterDomain the cluster's
	// DNS domain (CLUSTER_DOMAIN, cluster.local). The kubelet join mode
	// only: k3s's agents take both from the k3s server.
	KubeletClusterDNS []netip.Addr
	ClusterDomain     string
	// InternalAddr is the listener for the internal routes without
	// credentials (INTERNAL_ADDR); InternalToken opens them on the public
	// listener (INTERNAL_TOKEN). Neither set: internal routes are off.
	InternalAddr  string
	InternalToken string
	// DCGMTargetsDir is where each GPU node's DCGM scrape target is kept as
	// a Prometheus file_sd file (DCGM_TARGETS_DIR); empty means off. The
	// program makes the directory's Backends.Targets (master.Run does).
	DCGMTargetsDir string
	// K3sBinary is the k3s the master runs (K3S_BINARY, default
	// /usr/local/bin/k3s, where k3s installs itself), served to joining
	// machines of the master's own OS and architecture that lack k3s;
	// missing: machines install k3s themselves.
	K3sBinary string
	// WorkerImageTar is the GPU worker image (RayImageWorker) as a tarball
	// nodes download and import (WORKER_IMAGE_TAR); empty means nodes pull
	// it themselves.
	WorkerImageTar string
	// TLS is "on" (the public listener serves HTTPS and the join command
	// pins its key), "off" (plain HTTP, logged as insecure) or empty: on
	// outside dev mode, off in it (TLS). UsesTLS resolves it.
	TLS string
	// TLSCertFile and TLSKeyFile are the public listener's PEM certificate
	// and key (TLS_CERT_FILE, TLS_KEY_FILE; both or neither); unset, a
	// self-signed pair is made at first start and kept beside the ledger
	// (tls.crt, tls.key 0600) for every later start.
	TLSCertFile string
	TLSKeyFile  string
	// PublicPin is the public-key pin of the certificate the public
	// listener serves (tlspin's "sha256//..." form), set by the program
	// that loaded it; the join command carries it. Empty: plain HTTP.
	PublicPin string
	// VPNHTTPPort is the VPN listener's port (VPN_HTTP_PORT, 8880): plain
	// HTTP on MasterVPNIP, reached only through the tunnels (WireGuard
	// authenticates and encrypts), serving what joined nodes and their
	// Ray workers call: register, report-version, leave, the worker image
	// and KubeTorch bundles.
	VPNHTTPPort int
	// VPNURL is that listener's URL, set by the program that serves it
	// (http://MasterVPNIP:VPNHTTPPort); validate tells nodes to call it
	// once their tunnel is up. Empty: no VPN listener (dev mode, a
	// master whose peers are in memory), and nodes keep the public URL.
	VPNURL string
	// AgentDir holds the join agent binaries the node side downloads,
	// named join-node-<os>-<arch> (AGENT_DIR); empty means none.
	AgentDir string
	// MaxBodyBytes bounds a request body (MAX_BODY_BYTES, 1 MiB).
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful stop (SHUTDOWN_TIMEOUT, 10s).
	ShutdownTimeout time.Duration
	// ValidatedTTL is how long a node may stay validated without
	// registering before its reservation is released (VALIDATED_TTL, 10m);
	// ReapInterval how often that is checked (1m).
	ValidatedTTL time.Duration
	ReapInterval time.Duration
	// AddressQuarantine is how long a released VPN address rests before a
	// new node gets it (ADDRESS_QUARANTINE, 1h; 0s: none): a machine whose
	// link service was down may still hold a peer for the departed node.
	// The program that builds the Keyring passes it on
	// (joinkeys.Options.AddressQuarantine).
	AddressQuarantine time.Duration
	// ConsolePublic serves the web console to every caller of the public
	// listener (CONSOLE_PUBLIC=on). Off by default: with the self-signed
	// pair the server makes (TLS on, no TLS_CERT_FILE), a browser cannot
	// verify the listener, and an administrator who clicks through its
	// warning would click through a man in the middle's too; the console
	// is then served to loopback callers only (an SSH port forward).
	ConsolePublic bool
	// SharedOrgs are orgs whose machines every machine sees in the peer
	// directory, and which see every machine (SHARED_ORGS, comma-separated;
	// none by default): otherwise a machine sees only its own org's.
	SharedOrgs []string
	// FleetLAN says the fleet's machines share a LAN (FLEET_LAN=on; off by
	// default): only then are endpoints in private ranges that agents
	// advertise handed to other machines.
	FleetLAN bool
	// Dev allows unsafe defaults: the default or a short JWT secret, no
	// admin token (GRIDWEAVE_DEV=1 or --dev).
	Dev bool
}

// The join modes (KUBE_JOIN_MODE).
const (
	JoinModeK3s     = "k3s"
	JoinModeKubelet = "kubelet"
)

// A SettingError is a configuration refused for the value of one of its
// settings: Setting is the Config field's name (a program maps it to
// where the value came from, an environment variable, say).
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return "Config." + e.Setting + ": " + e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// ConfigError names the environment variable whose value is wrong.
type ConfigError struct {
	Variable string
	Problem  string
}

func (e *ConfigError) Error() string { return e.Variable + ": " + e.Problem }

// dashboardURLFor is the dashboard's URL on the host of a Ray address
// (ray://host:10001, host:6379 or host).
func dashboardURLFor(rayAddress string) string {
	host := rayAddress
	if _, rest, ok := strings.Cut(host, "://"); ok {
		host = rest
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return "http://" + net.JoinHostPort(strings.Trim(host, "[]/"), "8265")
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in a
// binary, a map in tests). A malformed value is a *ConfigError naming the
// variable. Safety (secrets) is checked by Check, not here.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		DBPath:               env("KUBERAY_DB", "/data/kuberay.db"),
		DBSync:               env("KUBERAY_DB_SYNC", "normal"),
		Store:                strings.ToLower(env("KUBERAY_STORE", "sqlite")),
		Namespace:            env("KUBERAY_NAMESPACE", "gridweave"),
		SystemNamespace:      env("GRIDWEAVE_SYSTEM_NAMESPACE", "gridweave-system"),
		AdminToken:           strings.TrimSpace(getenv("ADMIN_TOKEN")),
		JWTSecret:            env("JWT_SECRET", DefaultJWTSecret),
		ServerVersion:        env("SERVER_VERSION", "0.0.0"),
		RayImage:             env("RAY_IMAGE", "rayproject/ray:2.54.0-py311"),
		RayImageWorker:       env("RAY_IMAGE_WORKER", "gridweave-worker:latest"),
		ClusterName:          env("CLUSTER_NAME", "gridweave-cluster"),
		MasterIP:             env("MASTER_IP", ""),
		HubIP:                env("HUB_IP", ""),
		WireGuardInterface:   env("WG_INTERFACE", "wg0"),
		RayDashboardURL:      env("RAY_DASHBOARD_URL", ""),
		K3sURL:               env("K3S_URL", ""),
		K3sAgentTokenFile:    env("K3S_AGENT_TOKEN_FILE", ""),
		InternalAddr:         env("INTERNAL_ADDR", ""),
		AgentDir:             env("AGENT_DIR", ""),
		WorkerImageTar:       env("WORKER_IMAGE_TAR", ""),
		K3sBinary:            env("K3S_BINARY", "/usr/local/bin/k3s"),
		KubeJoinMode:         strings.ToLower(env("KUBE_JOIN_MODE", JoinModeK3s)),
		KubeletCAFile:        env("KUBELET_CA_FILE", ""),
		KubeletTLSServerName: env("KUBELET_TLS_SERVER_NAME", ""),
		KubeletBinary:        env("KUBELET_BINARY", "/usr/bin/kubelet"),
		DCGMTargetsDir:       env("DCGM_TARGETS_DIR", ""),
		TLS:                  strings.ToLower(env("TLS", "")),
		TLSCertFile:          env("TLS_CERT_FILE", ""),
		TLSKeyFile:           env("TLS_KEY_FILE", ""),
		InternalToken:        getenv("INTERNAL_TOKEN"),
		Dev:                  env("GRIDWEAVE_DEV", "") == "1" || env("GRIDWEAVE_DEV", "") == "true",
	}
	if head := env("RAY_HEAD_ADDRESS", ""); head != "" {
		return Config{}, &ConfigError{"RAY_HEAD_ADDRESS", fmt.Sprintf("%q is not used: the server reaches Ray only through the head's dashboard (Serve statuses, jobs), never through the Ray client; "+
			"unset RAY_HEAD_ADDRESS and, if the default (http://MASTER_VPN_IP:8265) is not the head's, set RAY_DASHBOARD_URL=%s", head, dashboardURLFor(head))}
	}
	var err error
	if c.Port, err = envInt(env, "KUBERAY_PORT", 8800, 1, 65535); err != nil {
		return Config{}, err
	}
	if c.WireGuardPort, err = envInt(env, "WG_PORT", 51820, 1, 65535); err != nil {
		return Config{}, err
	}
	if c.VPNHTTPPort, err = envInt(env, "VPN_HTTP_PORT", 8880, 1, 65535); err != nil {
		return Config{}, err
	}
	if c.RateLimitPerMinute, err = envInt(env, "RATE_LIMIT_PER_MINUTE", 6000, 1, 1<<30); err != nil {
		return Config{}, err
	}
	maxBody, err := envInt(env, "MAX_BODY_BYTES", 1<<20, 1024, 1<<30)
	if err != nil {
		return Config{}, err
	}
	c.MaxBodyBytes = int64(maxBody)
	if c.MasterVPNIP, err = netip.ParseAddr(env("MASTER_VPN_IP", "10.100.0.1")); err != nil || !c.MasterVPNIP.Is4() {
		return Config{}, &ConfigError{"MASTER_VPN_IP", fmt.Sprintf("%q is not an IPv4 address", env("MASTER_VPN_IP", ""))}
	}
	if c.VPNCIDR, err = netip.ParsePrefix(env("VPN_CIDR", "10.100.0.0/16")); err != nil {
		return Config{}, &ConfigError{"VPN_CIDR", fmt.Sprintf("%q is not a CIDR", env("VPN_CIDR", ""))}
	}
	if c.ServiceCIDR, err = netip.ParsePrefix(env("SERVICE_CIDR", "10.43.0.0/16")); err != nil || c.ServiceCIDR.Masked() != c.ServiceCIDR {
		return Config{}, &ConfigError{"SERVICE_CIDR", fmt.Sprintf("%q is not a CIDR such as 10.43.0.0/16 (k3s's --service-cidr)", env("SERVICE_CIDR", ""))}
	}
	if c.ClusterCIDR, err = netip.ParsePrefix(env("CLUSTER_CIDR", joinkeys.DefaultPodRange.Cluster.String())); err != nil {
		return Config{}, &ConfigError{"CLUSTER_CIDR", fmt.Sprintf("%q is not a CIDR such as 10.42.0.0/16 (k3s's --cluster-cidr)", env("CLUSTER_CIDR", ""))}
	}
	if c.NodeCIDRMaskBits, err = envInt(env, "NODE_CIDR_MASK", max(joinkeys.DefaultPodRange.NodeBits, c.ClusterCIDR.Bits()), 1, 126); err != nil {
		return Config{}, err
	}
	if err := (joinkeys.PodRange{Cluster: c.ClusterCIDR, NodeBits: c.ClusterCIDR.Bits()}).Validate(); err != nil {
		return Config{}, &ConfigError{"CLUSTER_CIDR", err.Error()}
	}
	if err := (joinkeys.PodRange{Cluster: c.ClusterCIDR, NodeBits: c.NodeCIDRMaskBits}).Validate(); err != nil {
		return Config{}, &ConfigError{"NODE_CIDR_MASK", err.Error()}
	}
	for _, other := range []struct {
		name   string
		prefix netip.Prefix
	}{{"VPN_CIDR", c.VPNCIDR}, {"SERVICE_CIDR", c.ServiceCIDR}} {
		if other.prefix.Overlaps(c.ClusterCIDR) {
			return Config{}, &ConfigError{"CLUSTER_CIDR", fmt.Sprintf("%s overlaps %s %s: pod, node and Service addresses must not share a range", c.ClusterCIDR, other.name, other.prefix)}
		}
	}
	if !c.VPNCIDR.Contains(c.MasterVPNIP) {
		return Config{}, &ConfigError{"MASTER_VPN_IP", fmt.Sprintf("%s is not inside VPN_CIDR %s", c.MasterVPNIP, c.VPNCIDR)}
	}
	if c.ShutdownTimeout, err = time.ParseDuration(env("SHUTDOWN_TIMEOUT", "10s")); err != nil || c.ShutdownTimeout <= 0 {
		return Config{}, &ConfigError{"SHUTDOWN_TIMEOUT", fmt.Sprintf("%q is not a positive duration such as 10s", env("SHUTDOWN_TIMEOUT", ""))}
	}
	c.KubeTorchDir = env("KUBETORCH_DIR", filepath.Join(filepath.Dir(c.DBPath), "bundles"))
	maxBundle, err := envInt(env, "KUBETORCH_MAX_BUNDLE_BYTES", 256<<20, 1024, 1<<40)
	if err != nil {
		return Config{}, err
	}
	c.KubeTorchMaxBundle = int64(maxBundle)
	c.KubeTorchBaseURL = strings.TrimRight(env("KUBETORCH_BASE_URL", ""), "/")
	maxExpanded, err := envInt(env, "KUBETORCH_MAX_EXPANDED_BYTES", 512<<20, 1024, 1<<42)
	if err != nil {
		return Config{}, err
	}
	c.KubeTorchMaxExpanded = int64(maxExpanded)
	c.KubeTorchSyncInterval = 10 * time.Second
	if c.KubeTorchMaxEntries, err = envInt(env, "KUBETORCH_MAX_ENTRIES", 10000, 1, 10_000_000); err != nil {
		return Config{}, err
	}
	if c.KubeTorchMaxRatio, err = envInt(env, "KUBETORCH_MAX_RATIO", 100, 2, 100_000); err != nil {
		return Config{}, err
	}
	if c.RayDashboardTimeout, err = time.ParseDuration(env("RAY_DASHBOARD_TIMEOUT", "15s")); err != nil || c.RayDashboardTimeout <= 0 {
		return Config{}, &ConfigError{"RAY_DASHBOARD_TIMEOUT", fmt.Sprintf("%q is not a positive duration such as 15s", env("RAY_DASHBOARD_TIMEOUT", ""))}
	}
	if c.ValidatedTTL, err = time.ParseDuration(env("VALIDATED_TTL", "10m")); err != nil || c.ValidatedTTL <= 0 {
		return Config{}, &ConfigError{"VALIDATED_TTL", fmt.Sprintf("%q is not a positive duration such as 10m", env("VALIDATED_TTL", ""))}
	}
	c.ReapInterval = time.Minute
	if c.AddressQuarantine, err = time.ParseDuration(env("ADDRESS_QUARANTINE", "1h")); err != nil || c.AddressQuarantine < 0 {
		return Config{}, &ConfigError{"ADDRESS_QUARANTINE", fmt.Sprintf("%q is not a duration such as 1h (0s for none)", env("ADDRESS_QUARANTINE", ""))}
	}
	for _, o := range strings.Split(env("SHARED_ORGS", ""), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.SharedOrgs = append(c.SharedOrgs, o)
		}
	}
	switch strings.ToLower(env("CONSOLE_PUBLIC", "off")) {
	case "on":
		c.ConsolePublic = true
	case "off":
	default:
		return Config{}, &ConfigError{"CONSOLE_PUBLIC", fmt.Sprintf("%q is neither on nor off", env("CONSOLE_PUBLIC", ""))}
	}
	switch strings.ToLower(env("FLEET_LAN", "off")) {
	case "on":
		c.FleetLAN = true
	case "off":
	default:
		return Config{}, &ConfigError{"FLEET_LAN", fmt.Sprintf("%q is neither on nor off", env("FLEET_LAN", ""))}
	}
	for _, o := range strings.Split(env("CORS_ORIGINS", "*"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.CORSOrigins = append(c.CORSOrigins, o)
		}
	}
	if c.MasterIP != "" {
		// An address, not a name: it goes into the join command, the
		// WireGuard endpoint nodes dial and the certificate's SANs, and a
		// name there fails every join.
		if _, err := netip.ParseAddr(c.MasterIP); err != nil {
			return Config{}, &ConfigError{"MASTER_IP", fmt.Sprintf("%q is not an IP address; give the master's public address (resolve a host name once, e.g. with getent hosts)", c.MasterIP)}
		}
	}
	if c.HubIP != "" {
		if _, err := netip.ParseAddr(c.HubIP); err != nil {
			return Config{}, &ConfigError{"HUB_IP", fmt.Sprintf("%q is not an IP address; give this host's address where nodes reach its WireGuard port", c.HubIP)}
		}
	}
	if c.InternalAddr != "" {
		if err := checkInternalAddr(c.InternalAddr, c.VPNCIDR, c.ClusterCIDR); err != nil {
			return Config{}, &ConfigError{"INTERNAL_ADDR", err.Error()}
		}
	}
	if err := fleet.CheckVersion(c.ServerVersion); err != nil {
		return Config{}, &ConfigError{"SERVER_VERSION", err.Error()}
	}
	if c.TLS != "" && c.TLS != "on" && c.TLS != "off" {
		return Config{}, &ConfigError{"TLS", fmt.Sprintf("%q is neither on nor off", c.TLS)}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return Config{}, &ConfigError{"TLS_CERT_FILE", "TLS_CERT_FILE and TLS_KEY_FILE go together: set both, or neither for a generated pair"}
	}
	if c.SystemNamespace == c.Namespace {
		return Config{}, &ConfigError{"GRIDWEAVE_SYSTEM_NAMESPACE", fmt.Sprintf("%q is KUBERAY_NAMESPACE too: the master's identity must live apart from the workloads, whose editors read the Secrets there", c.SystemNamespace)}
	}
	if c.KubeJoinMode != JoinModeK3s && c.KubeJoinMode != JoinModeKubelet {
		return Config{}, &ConfigError{"KUBE_JOIN_MODE", fmt.Sprintf("%q is neither k3s nor kubelet", c.KubeJoinMode)}
	}
	c.KubeletAPIServer = env("KUBELET_API_SERVER", "https://"+netip.AddrPortFrom(c.MasterVPNIP, 6443).String())
	if u, err := url.Parse(c.KubeletAPIServer); err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
		return Config{}, &ConfigError{"KUBELET_API_SERVER", fmt.Sprintf("%q is not an https://host:port URL of the API server", c.KubeletAPIServer)}
	}
	if c.KubeletTokenTTL, err = time.ParseDuration(env("KUBELET_TOKEN_TTL", "30m")); err != nil || c.KubeletTokenTTL < time.Minute || c.KubeletTokenTTL > 24*time.Hour {
		return Config{}, &ConfigError{"KUBELET_TOKEN_TTL", fmt.Sprintf("%q is not a duration from 1m to 24h such as 30m", env("KUBELET_TOKEN_TTL", ""))}
	}
	if c.KubeletDrainTimeout, err = time.ParseDuration(env("KUBELET_DRAIN_TIMEOUT", "20s")); err != nil || c.KubeletDrainTimeout < 0 || c.KubeletDrainTimeout > time.Hour {
		return Config{}, &ConfigError{"KUBELET_DRAIN_TIMEOUT", fmt.Sprintf("%q is not a duration from 0s to 1h such as 20s", env("KUBELET_DRAIN_TIMEOUT", ""))}
	}
	if raw := env("CLUSTER_DNS", ""); raw != "" {
		if c.KubeJoinMode != JoinModeKubelet {
			return Config{}, &ConfigError{"CLUSTER_DNS", "set with KUBE_JOIN_MODE=k3s: k3s's agents take the cluster DNS from the k3s server (its --cluster-dns); unset CLUSTER_DNS"}
		}
		for _, field := range strings.Split(raw, ",") {
			addr, err := netip.ParseAddr(strings.TrimSpace(field))
			if err != nil {
				return Config{}, &ConfigError{"CLUSTER_DNS", fmt.Sprintf("%q is not an IP address (a comma-separated list of them)", strings.TrimSpace(field))}
			}
			if addr != c.MasterVPNIP {
				return Config{}, &ConfigError{"CLUSTER_DNS", fmt.Sprintf("%s is not MASTER_VPN_IP %s: machines reach the cluster's DNS through their tunnels (they run no kube-proxy, so a Service's cluster IP does not answer), and any other address of the tunnels' ranges can be a joined machine's, which would then answer every pod's names; run the DNS server (CoreDNS, say) on MASTER_VPN_IP", addr, c.MasterVPNIP)}
			}
			c.KubeletClusterDNS = append(c.KubeletClusterDNS, addr)
		}
	}
	if env("CLUSTER_DOMAIN", "") != "" && c.KubeJoinMode != JoinModeKubelet {
		return Config{}, &ConfigError{"CLUSTER_DOMAIN", "set with KUBE_JOIN_MODE=k3s: k3s's agents take the cluster domain from the k3s server; unset CLUSTER_DOMAIN"}
	}
	c.ClusterDomain = strings.TrimSuffix(env("CLUSTER_DOMAIN", "cluster.local"), ".")
	if !api.ClusterDomain.MatchString(c.ClusterDomain) || len(c.ClusterDomain) > 253 {
		return Config{}, &ConfigError{"CLUSTER_DOMAIN", fmt.Sprintf("%q is not a DNS domain such as cluster.local", c.ClusterDomain)}
	}
	if c.KubeJoinMode == JoinModeKubelet && c.K3sURL != "" {
		return Config{}, &ConfigError{"KUBE_JOIN_MODE", "kubelet, with K3S_URL set: machines join by their own kubelet or by k3s's, not both; unset K3S_URL"}
	}
	if c.Store != "sqlite" && c.Store != "kubernetes" {
		return Config{}, &ConfigError{"KUBERAY_STORE", fmt.Sprintf("%q is neither sqlite nor kubernetes", c.Store)}
	}
	if c.LeaseDuration, err = time.ParseDuration(env("LEADER_LEASE_DURATION", "15s")); err != nil || c.LeaseDuration < 3*time.Second {
		return Config{}, &ConfigError{"LEADER_LEASE_DURATION", fmt.Sprintf("%q is not a duration of at least 3s such as 15s", env("LEADER_LEASE_DURATION", ""))}
	}
	if c.DBSync != "full" && c.DBSync != "normal" {
		return Config{}, &ConfigError{"KUBERAY_DB_SYNC", fmt.Sprintf("%q is neither full nor normal", c.DBSync)}
	}
	return c, nil
}

func envInt(env func(string, string) string, name string, def, lo, hi int) (int, error) {
	raw := env(name, "")
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		return 0, &ConfigError{name, fmt.Sprintf("%q is not a whole number from %d to %d", raw, lo, hi)}
	}
	return n, nil
}

// UsesTLS reports whether the public listener serves HTTPS: TLS=on, or
// TLS unset outside dev mode.
func (c Config) UsesTLS() bool { return c.TLS == "on" || (c.TLS == "" && !c.Dev) }

// ConsoleLoopbackOnly reports whether the public listener serves the web
// console to loopback callers only: it serves HTTPS with the pair the
// server made itself (no TLS_CERT_FILE), which no browser can verify, and
// CONSOLE_PUBLIC is not on.
func (c Config) ConsoleLoopbackOnly() bool {
	return c.UsesTLS() && c.TLSCertFile == "" && !c.ConsolePublic
}

// MinSecretLen is the shortest JWT_SECRET accepted outside dev mode.
const MinSecretLen = 32

// CheckJWTSecret refuses, outside dev mode, a JWT secret that is the
// default, a placeholder or short: what Check says of JWT_SECRET alone,
// for a program that stores the secret before the rest of the
// configuration is complete.
func (c Config) CheckJWTSecret() error {
	if c.Dev {
		return nil
	}
	switch {
	case placeholder(c.JWTSecret):
		return &ConfigError{"JWT_SECRET", "is a placeholder from the documentation; generate a secret (openssl rand -hex 32)"}
	case c.JWTSecret == DefaultJWTSecret:
		return &ConfigError{"JWT_SECRET", "is the published default; set a random secret of at least 32 bytes (or start in dev mode with --dev / GRIDWEAVE_DEV=1)"}
	case len(c.JWTSecret) < MinSecretLen:
		return &ConfigError{"JWT_SECRET", fmt.Sprintf("is %d bytes; use at least %d random bytes", len(c.JWTSecret), MinSecretLen)}
	}
	return nil
}

// Check refuses unsafe settings outside dev mode: the default, a
// placeholder or a short JWT secret, an empty, placeholder or short admin
// token, a placeholder or short internal token.
func (c Config) Check() error {
	if c.Dev {
		return nil
	}
	if err := c.CheckJWTSecret(); err != nil {
		return err
	}
	for _, secret := range []struct{ name, value string }{{"ADMIN_TOKEN", c.AdminToken}, {"INTERNAL_TOKEN", c.InternalToken}} {
		if placeholder(secret.value) {
			return &ConfigError{secret.name, "is a placeholder from the documentation; generate a secret (openssl rand -hex 32)"}
		}
	}
	switch {
	case c.AdminToken == "":
		return &ConfigError{"ADMIN_TOKEN", "is empty; set a random token (or start in dev mode with --dev / GRIDWEAVE_DEV=1)"}
	case len(c.AdminToken) < 16:
		return &ConfigError{"ADMIN_TOKEN", "is shorter than 16 characters; use a long random token"}
	case c.InternalToken != "" && len(c.InternalToken) < MinSecretLen:
		return &ConfigError{"INTERNAL_TOKEN", fmt.Sprintf("is %d characters; use at least %d random characters", len(c.InternalToken), MinSecretLen)}
	}
	return nil
}

// placeholder reports whether a secret is one the documentation shows in
// its place: anything saying change-me, and the usual stand-ins.
func placeholder(secret string) bool {
	lower := strings.ToLower(secret)
	if strings.Contains(lower, "change-me") || strings.Contains(lower, "changeme") || strings.Contains(lower, "change_me") {
		return true
	}
	switch lower {
	case "secret", "password", "token", "admin", "xxx", "todo", "replace-me", "<secret>", "<token>":
		return true
	}
	return false
}

// checkInternalAddr refuses an internal listener every joined node or
// the world would reach: it must name a loopback or private address
// explicitly, not every interface, and not one inside the VPN.
func checkInternalAddr(addr string, vpn, cluster netip.Prefix) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return fmt.Errorf("%q does not name an IP address; give the loopback or private address the gateway reaches, e.g. 127.0.0.1:8801", addr)
	case ip.IsUnspecified():
		return fmt.Errorf("%q listens on every interface, where the internal routes would be open to anyone who reaches the host; name the address the gateway reaches", addr)
	case vpn.Contains(ip.Unmap()):
		return fmt.Errorf("%q is inside VPN_CIDR %s, where every joined node would reach the CRD and Serve routes without a credential", addr, vpn)
	case cluster.Contains(ip.Unmap()):
		return fmt.Errorf("%q is inside CLUSTER_CIDR %s, the pods' range, which the internal listener refuses", addr, cluster)
	case !ip.IsLoopback() && !ip.IsPrivate() && !benchmarkRange.Contains(ip.Unmap()):
		return fmt.Errorf("%q is not a loopback or private address; the internal listener has no credentials", addr)
	}
	return nil
}

// benchmarkRange is 198.18.0.0/15, set aside for testing networks (RFC
// 2544) and never routed on the internet: as good as a private range for
// the internal listener (a lab's bridge, the tests' namespaces).
var benchmarkRange = netip.MustParsePrefix("198.18.0.0/15")
