package gridweave

import (
	"errors"
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

// Config is the service's configuration. DefaultConfig gives every
// setting its documented default; a program fills the rest from where its
// users set them (the server program from its environment), then
// Validate and Check judge the whole. Messages name a setting by
// SettingName, so a program's users read the names they set.
type Config struct {
	// Port is the public listener's port (default 8800); it also goes
	// into the join command.
	Port int
	// DBPath is the SQLite ledger (default /data/kuberay.db).
	DBPath string
	// DBSync is "normal" (the default: a commit survives a crash of the
	// process; the last commits before a loss of power may roll back,
	// never corrupting the ledger) or "full" (every commit synced to
	// disk; the writes queued together share each commit, so under load
	// it costs about an eighth of the join rate). A node whose last join
	// rolled back is refused with 401 on its next re-join and joins again
	// with its key.
	DBSync string
	// Store is where the ledger lives: "sqlite" (the default), the file
	// DBPath on this host, or "kubernetes", objects in Namespace of the
	// cluster, which several server replicas can share (one of them,
	// elected on a Lease, drives the WireGuard device).
	Store string
	// HubIP is where nodes reach this replica's WireGuard device while it
	// leads (default MasterIP): with the kubernetes Store the leader
	// publishes HubIP:WireGuardPort and every replica answers it, while
	// MasterIP is the replicas' stable address in join commands.
	HubIP string
	// ReplicaAddr is where this replica takes the ledger's writes from the
	// others while it leads, as host:port (an address the other replicas
	// reach, e.g. the pod's IP; a host of 0.0.0.0 or :: listens everywhere
	// and is not one): with the kubernetes Store only the leader writes the
	// ledger, and every other replica hands it each write over this
	// channel (always TLS, pinned to a key derived from the JWT secret, and
	// the replicas' credential derived from the same secret). Required
	// with the kubernetes Store.
	ReplicaAddr string
	// LeaseDuration is how long a leader's Lease holds without renewal
	// (default 15s, at least 3s): after a leader dies, another replica
	// takes over within it. Only with the kubernetes Store.
	LeaseDuration time.Duration
	// Namespace holds the RayClusters (default gridweave).
	Namespace string
	// SystemNamespace holds the master's own objects with several
	// replicas (default gridweave-system): the Secret of its identity
	// (WireGuard key, TLS pair, JWT secret), the leader's Lease and the
	// hub ConfigMap. It must not be Namespace, where the workloads'
	// editors read Secrets.
	SystemNamespace string
	// AdminToken is the admin bearer token (none by default, which Check
	// refuses outside dev mode).
	AdminToken string
	// JWTSecret signs provider keys and verifies admin, user and provider
	// JWTs (default DefaultJWTSecret, which Check refuses outside dev
	// mode).
	JWTSecret string
	// ServerVersion is the master's version for the worker version gate
	// (default 0.0.0).
	ServerVersion string
	// RayImage is the head's image (default rayproject/ray:2.54.0-py311);
	// RayImageWorker the GPU workers' (default gridweave-worker:latest).
	// Ray refuses a node whose Python differs from the head's (to the
	// minor release with the worker image's
	// RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor): the defaults are a
	// pair, Ray 2.54.0 on Python 3.11 (the worker image deploy/rayimage
	// builds).
	RayImage       string
	RayImageWorker string
	// ClusterName is the RayCluster GPU nodes join (default
	// gridweave-cluster).
	ClusterName string
	// MasterIP is the master's public address, in the join command and the
	// WireGuard endpoint: an IP address, not a name; empty (the default)
	// means the join command names a placeholder.
	MasterIP string
	// MasterVPNIP is the master's WireGuard address (default 10.100.0.1,
	// IPv4) inside VPNCIDR (default 10.100.0.0/16).
	MasterVPNIP netip.Addr
	VPNCIDR     netip.Prefix
	// ServiceCIDR is the cluster's Service address range (default
	// 10.43.0.0/16, k3s's default --service-cidr): with MasterIP and the
	// pod CIDRs and addresses of the cluster's other Nodes, no node's pod
	// CIDR may overlap it, so none can be routed into a tunnel.
	ServiceCIDR netip.Prefix
	// ClusterCIDR is the cluster's pod range (default 10.42.0.0/16, k3s's
	// default --cluster-cidr) and NodeCIDRMaskBits the length of a node's
	// pod CIDR in it (default 24, or ClusterCIDR's own length when that is
	// longer): a Node's pod CIDR is recorded, routed into the tunnels and
	// allowed into its peer only inside it, on the master and on every
	// machine. It must not overlap VPNCIDR or ServiceCIDR.
	ClusterCIDR      netip.Prefix
	NodeCIDRMaskBits int
	// WireGuardInterface and WireGuardPort are the master's device
	// (default wg0 and 51820).
	WireGuardInterface string
	WireGuardPort      int
	// ReflexivePort is the first of the two UDP ports of the master's
	// reflexive-address service (STUN binding requests, package
	// mesh/reflexive), which nodes probe to tell how their NAT maps; the
	// directory names them at the master endpoint's address. Default
	// 3478; 0 turns it off.
	ReflexivePort int
	// RayDashboardURL is where the Ray proxy and KubeTorch reach the Ray
	// dashboard; the server program defaults it to
	// http://MasterVPNIP:8265 against a real cluster. Empty: /v1/ray and
	// KubeTorch training answer 503.
	RayDashboardURL string
	// KubeTorchDir keeps the code bundles (empty: "bundles" beside
	// DBPath, KubeTorchBundleDir); KubeTorchMaxBundle bounds an upload (default 256 MiB, at
	// least 1 KiB); KubeTorchBaseURL is where Ray workers fetch bundles
	// (default http://MasterVPNIP:VPNHTTPPort, the VPN listener).
	KubeTorchDir       string
	KubeTorchMaxBundle int64
	KubeTorchBaseURL   string
	// KubeTorchMaxExpanded, KubeTorchMaxEntries and KubeTorchMaxRatio
	// bound what a bundle expands to (defaults 512 MiB, 10000 entries and
	// a ratio of 100).
	KubeTorchMaxExpanded int64
	// KubeTorchSyncInterval is how often Run brings unfinished KubeTorch
	// jobs' GridweaveJob status in step with Ray (default 10s).
	KubeTorchSyncInterval time.Duration
	KubeTorchMaxEntries   int
	KubeTorchMaxRatio     int
	// RayDashboardTimeout bounds each call of the Ray proxy (default
	// 15s): a slower dashboard is a 504.
	RayDashboardTimeout time.Duration
	// CORSOrigins are the origins granted cross-origin access (default
	// "*").
	CORSOrigins []string
	// RateLimitPerMinute is the per-client-IP request budget (default
	// 6000).
	RateLimitPerMinute int
	// K3sURL and K3sAgentToken tell nodes how to join k3s; empty (the
	// default) means the k3s step is off. K3sAgentTokenFile names the file
	// of the token, which the program reads into K3sAgentToken (master.Run
	// does).
	K3sURL            string
	K3sAgentToken     string
	K3sAgentTokenFile string
	// KubeJoinMode is how a machine's Node joins the cluster: "k3s" (the
	// default; K3sURL and the k3s agent) or "kubelet" (any conformant
	// control plane: the machine's own kubelet, TLS-bootstrapped with a
	// token validate makes for it).
	KubeJoinMode string
	// The kubelet join mode: KubeletAPIServer is the API server's URL
	// through the tunnel (empty: https://MasterVPNIP:6443,
	// KubeletAPIServerURL); KubeletCAPEM
	// the cluster CA (read from the file KubeletCAFile names, else the CA
	// the server's own Kubernetes client trusts, which the program sets);
	// KubeletTLSServerName the name the API server's certificate is
	// checked against when it does not name that address; KubeletBinary
	// the kubelet served to machines (default /usr/bin/kubelet);
	// KubeletTokenTTL a bootstrap token's life (default 30m, from 1m to
	// 24h); KubeletDrainTimeout how long a disconnect waits for the
	// evicted pods of the machine's Node before it deletes the Node
	// (default 20s, under the 30 s a join agent waits for its leave's
	// answer at the public URL; 0s deletes it undrained; at most 1h).
	KubeletAPIServer     string
	KubeletCAFile        string
	KubeletCAPEM         []byte
	KubeletTLSServerName string
	KubeletBinary        string
	KubeletTokenTTL      time.Duration
	KubeletDrainTimeout  time.Duration
	// KubeletClusterDNS is the cluster's DNS the machines' pods resolve
	// with (none by default: pods get their machine's resolver):
	// MasterVPNIP, the one address of the tunnels' ranges no machine can
	// hold (a machine of this mode runs no kube-proxy, so a Service's
	// cluster IP does not answer); ClusterDomain the cluster's DNS domain
	// (default cluster.local). The kubelet join mode only: k3s's agents
	// take both from the k3s server.
	KubeletClusterDNS []netip.Addr
	ClusterDomain     string
	// InternalAddr is the listener for the internal routes without
	// credentials: a loopback or private address, named; InternalToken
	// opens them on the public listener. Neither set (the default):
	// internal routes are off.
	InternalAddr  string
	InternalToken string
	// DCGMTargetsDir is where each GPU node's DCGM scrape target is kept as
	// a Prometheus file_sd file; empty (the default) means off. The
	// program makes the directory's Backends.Targets (master.Run does).
	DCGMTargetsDir string
	// K3sBinary is the k3s the master runs (default /usr/local/bin/k3s,
	// where k3s installs itself), served to joining machines of the
	// master's own OS and architecture that lack k3s; missing: machines
	// install k3s themselves.
	K3sBinary string
	// WorkerImageTar is the GPU worker image (RayImageWorker) as a tarball
	// nodes download and import; empty (the default) means nodes pull it
	// themselves.
	WorkerImageTar string
	// TLS is "on" (the public listener serves HTTPS and the join command
	// pins its key), "off" (plain HTTP, logged as insecure) or empty (the
	// default): on outside dev mode, off in it. UsesTLS resolves it.
	TLS string
	// TLSCertFile and TLSKeyFile are the public listener's PEM certificate
	// and key (both or neither); unset, a self-signed pair is made at
	// first start and kept beside the ledger (tls.crt, tls.key 0600) for
	// every later start.
	TLSCertFile string
	TLSKeyFile  string
	// PublicPin is the public-key pin of the certificate the public
	// listener serves (tlspin's "sha256//..." form), set by the program
	// that loaded it; the join command carries it. Empty: plain HTTP.
	PublicPin string
	// VPNHTTPPort is the VPN listener's port (default 8880): plain HTTP
	// on MasterVPNIP, reached only through the tunnels (WireGuard
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
	// named join-node-<os>-<arch>; empty (the default) means none.
	AgentDir string
	// MaxBodyBytes bounds a request body (default 1 MiB, at least 1 KiB).
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful stop (default 10s).
	ShutdownTimeout time.Duration
	// ValidatedTTL is how long a node may stay validated without
	// registering before its reservation is released (default 10m);
	// ReapInterval how often that is checked (default 1m).
	ValidatedTTL time.Duration
	ReapInterval time.Duration
	// AddressQuarantine is how long a released VPN address rests before a
	// new node gets it (default 1h; 0s: none): a machine whose link
	// service was down may still hold a peer for the departed node. The
	// program that builds the Keyring passes it on
	// (joinkeys.Options.AddressQuarantine).
	AddressQuarantine time.Duration
	// ConsolePublic serves the web console to every caller of the public
	// listener. Off by default: with the self-signed pair the server
	// makes (TLS on, no TLSCertFile), a browser cannot verify the
	// listener, and an administrator who clicks through its warning would
	// click through a man in the middle's too; the console is then served
	// to loopback callers only (an SSH port forward).
	ConsolePublic bool
	// SharedOrgs are orgs whose machines every machine sees in the peer
	// directory, and which see every machine (none by default): otherwise
	// a machine sees only its own org's.
	SharedOrgs []string
	// FleetLAN says the fleet's machines share a LAN (off by default):
	// only then are endpoints in private ranges that agents advertise
	// handed to other machines.
	FleetLAN bool
	// Dev allows unsafe defaults: the default or a short JWT secret, no
	// admin token.
	Dev bool
	// SettingName names a setting (a Config field's name, "JWTSecret")
	// as the program's users set it (an environment variable, a flag), in
	// the messages of Validate, Check, the start and the API. Nil: the
	// field's name, "Config.JWTSecret".
	SettingName func(field string) string
}

// Name is how c's messages name the setting field (SettingName's).
func (c Config) Name(field string) string {
	if c.SettingName != nil {
		if name := c.SettingName(field); name != "" {
			return name
		}
	}
	return "Config." + field
}

// DefaultConfig is the configuration of every setting's documented
// default.
func DefaultConfig() Config {
	c := Config{
		Port: 8800, DBPath: "/data/kuberay.db", DBSync: "normal", Store: "sqlite",
		Namespace: "gridweave", SystemNamespace: "gridweave-system", JWTSecret: DefaultJWTSecret,
		ServerVersion: "0.0.0", RayImage: "rayproject/ray:2.54.0-py311", RayImageWorker: "gridweave-worker:latest",
		ClusterName: "gridweave-cluster", MasterVPNIP: netip.MustParseAddr("10.100.0.1"),
		VPNCIDR: netip.MustParsePrefix("10.100.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.43.0.0/16"),
		ClusterCIDR: joinkeys.DefaultPodRange.Cluster, NodeCIDRMaskBits: joinkeys.DefaultPodRange.NodeBits,
		WireGuardInterface: "wg0", WireGuardPort: 51820, ReflexivePort: 3478, VPNHTTPPort: 8880,
		KubeTorchMaxBundle: 256 << 20, KubeTorchMaxExpanded: 512 << 20, KubeTorchSyncInterval: 10 * time.Second,
		KubeTorchMaxEntries: 10000, KubeTorchMaxRatio: 100, RayDashboardTimeout: 15 * time.Second,
		CORSOrigins: []string{"*"}, RateLimitPerMinute: 6000, KubeJoinMode: JoinModeK3s,
		KubeletBinary: "/usr/bin/kubelet", KubeletTokenTTL: 30 * time.Minute, KubeletDrainTimeout: 20 * time.Second,
		ClusterDomain: "cluster.local", K3sBinary: "/usr/local/bin/k3s", MaxBodyBytes: 1 << 20,
		ShutdownTimeout: 10 * time.Second, ValidatedTTL: 10 * time.Minute, ReapInterval: time.Minute,
		AddressQuarantine: time.Hour, LeaseDuration: 15 * time.Second,
	}
	return c
}

// KubeletAPIServerURL is KubeletAPIServer, or its default through the
// tunnel: https://MasterVPNIP:6443.
func (c Config) KubeletAPIServerURL() string {
	if c.KubeletAPIServer != "" {
		return c.KubeletAPIServer
	}
	return "https://" + netip.AddrPortFrom(c.MasterVPNIP, 6443).String()
}

// KubeTorchBundleDir is KubeTorchDir, or its default: "bundles" beside
// DBPath.
func (c Config) KubeTorchBundleDir() string {
	if c.KubeTorchDir != "" {
		return c.KubeTorchDir
	}
	return filepath.Join(filepath.Dir(c.DBPath), "bundles")
}

// The join modes (KubeJoinMode).
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

func refuse(setting, format string, args ...any) error {
	return &SettingError{Setting: setting, Err: fmt.Errorf(format, args...)}
}

// Validate refuses settings that cannot work, each with a *SettingError
// naming it: a value out of its range, ranges that overlap, settings
// that contradict each other. Safety (secrets) is Check's.
func (c Config) Validate() error {
	ints := []struct {
		field     string
		value, lo int64
		hi        int64
	}{
		{"Port", int64(c.Port), 1, 65535}, {"WireGuardPort", int64(c.WireGuardPort), 1, 65535},
		{"ReflexivePort", int64(c.ReflexivePort), 0, 65534},
		{"VPNHTTPPort", int64(c.VPNHTTPPort), 1, 65535}, {"RateLimitPerMinute", int64(c.RateLimitPerMinute), 1, 1 << 30},
		{"MaxBodyBytes", c.MaxBodyBytes, 1024, 1 << 30}, {"KubeTorchMaxBundle", c.KubeTorchMaxBundle, 1024, 1 << 40},
		{"KubeTorchMaxExpanded", c.KubeTorchMaxExpanded, 1024, 1 << 42}, {"KubeTorchMaxEntries", int64(c.KubeTorchMaxEntries), 1, 10_000_000},
		{"KubeTorchMaxRatio", int64(c.KubeTorchMaxRatio), 2, 100_000}, {"NodeCIDRMaskBits", int64(c.NodeCIDRMaskBits), 1, 126},
	}
	for _, n := range ints {
		if n.value < n.lo || n.value > n.hi {
			return refuse(n.field, "%d is not a whole number from %d to %d", n.value, n.lo, n.hi)
		}
	}
	if c.ReflexivePort != 0 && (c.ReflexivePort == c.WireGuardPort || c.ReflexivePort+1 == c.WireGuardPort) {
		return refuse("ReflexivePort", "%d and the next port must not be WireGuardPort (%d): the reflexive-address service has two ports of its own", c.ReflexivePort, c.WireGuardPort)
	}
	durations := []struct {
		field   string
		value   time.Duration
		lo, hi  time.Duration
		example string
	}{
		{"ShutdownTimeout", c.ShutdownTimeout, 1, 0, "10s"}, {"RayDashboardTimeout", c.RayDashboardTimeout, 1, 0, "15s"},
		{"ValidatedTTL", c.ValidatedTTL, 1, 0, "10m"}, {"ReapInterval", c.ReapInterval, 1, 0, "1m"},
		{"KubeTorchSyncInterval", c.KubeTorchSyncInterval, 1, 0, "10s"}, {"AddressQuarantine", c.AddressQuarantine, 0, 0, "1h (0s for none)"},
		{"LeaseDuration", c.LeaseDuration, 3 * time.Second, 0, "15s"},
		{"KubeletTokenTTL", c.KubeletTokenTTL, time.Minute, 24 * time.Hour, "30m"}, {"KubeletDrainTimeout", c.KubeletDrainTimeout, 0, time.Hour, "20s"},
	}
	for _, d := range durations {
		switch {
		case d.value < d.lo && d.lo == 1:
			return refuse(d.field, "%s is not a positive duration such as %s", d.value, d.example)
		case d.value < d.lo || d.hi > 0 && d.value > d.hi:
			to := "on"
			if d.hi > 0 {
				to = "to " + d.hi.String()
			}
			return refuse(d.field, "%s is not a duration from %s %s such as %s", d.value, d.lo, to, d.example)
		}
	}
	if !c.MasterVPNIP.Is4() {
		return refuse("MasterVPNIP", "%s is not an IPv4 address", c.MasterVPNIP)
	}
	if !c.VPNCIDR.IsValid() {
		return refuse("VPNCIDR", "is not a CIDR such as 10.100.0.0/16")
	}
	for _, p := range []struct {
		field, example string
		prefix         netip.Prefix
	}{{"ServiceCIDR", "10.43.0.0/16 (k3s's --service-cidr)", c.ServiceCIDR}, {"ClusterCIDR", "10.42.0.0/16 (k3s's --cluster-cidr)", c.ClusterCIDR}} {
		if !p.prefix.IsValid() || p.prefix.Masked() != p.prefix {
			return refuse(p.field, "%s is not a CIDR such as %s, its address the first of its range", p.prefix, p.example)
		}
	}
	if err := (joinkeys.PodRange{Cluster: c.ClusterCIDR, NodeBits: c.ClusterCIDR.Bits()}).Validate(); err != nil {
		return refuse("ClusterCIDR", "%v", err)
	}
	if err := (joinkeys.PodRange{Cluster: c.ClusterCIDR, NodeBits: c.NodeCIDRMaskBits}).Validate(); err != nil {
		return refuse("NodeCIDRMaskBits", "%v", err)
	}
	for _, other := range []struct {
		field  string
		prefix netip.Prefix
	}{{"VPNCIDR", c.VPNCIDR}, {"ServiceCIDR", c.ServiceCIDR}} {
		if other.prefix.Overlaps(c.ClusterCIDR) {
			return refuse("ClusterCIDR", "%s overlaps %s %s: pod, node and Service addresses must not share a range", c.ClusterCIDR, c.Name(other.field), other.prefix)
		}
	}
	if !c.VPNCIDR.Contains(c.MasterVPNIP) {
		return refuse("MasterVPNIP", "%s is not inside %s %s", c.MasterVPNIP, c.Name("VPNCIDR"), c.VPNCIDR)
	}
	if c.MasterIP != "" {
		// An address, not a name: it goes into the join command, the
		// WireGuard endpoint nodes dial and the certificate's SANs, and a
		// name there fails every join.
		if _, err := netip.ParseAddr(c.MasterIP); err != nil {
			return refuse("MasterIP", "%q is not an IP address; give the master's public address (resolve a host name once, e.g. with getent hosts)", c.MasterIP)
		}
	}
	if c.HubIP != "" {
		if _, err := netip.ParseAddr(c.HubIP); err != nil {
			return refuse("HubIP", "%q is not an IP address; give this host's address where nodes reach its WireGuard port", c.HubIP)
		}
	}
	if c.Store == "kubernetes" || c.ReplicaAddr != "" {
		if err := c.checkReplicaAddr(); err != nil {
			return &SettingError{Setting: "ReplicaAddr", Err: err}
		}
	}
	if c.InternalAddr != "" {
		if err := c.checkInternalAddr(); err != nil {
			return &SettingError{Setting: "InternalAddr", Err: err}
		}
	}
	if err := fleet.CheckVersion(c.ServerVersion); err != nil {
		return &SettingError{Setting: "ServerVersion", Err: err}
	}
	if c.TLS != "" && c.TLS != "on" && c.TLS != "off" {
		return refuse("TLS", "%q is neither on nor off", c.TLS)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return refuse("TLSCertFile", "%s and %s go together: set both, or neither for a generated pair", c.Name("TLSCertFile"), c.Name("TLSKeyFile"))
	}
	if c.SystemNamespace == c.Namespace {
		return refuse("SystemNamespace", "%q is %s too: the master's identity must live apart from the workloads, whose editors read the Secrets there", c.SystemNamespace, c.Name("Namespace"))
	}
	if c.KubeJoinMode != JoinModeK3s && c.KubeJoinMode != JoinModeKubelet {
		return refuse("KubeJoinMode", "%q is neither k3s nor kubelet", c.KubeJoinMode)
	}
	if u, err := url.Parse(c.KubeletAPIServerURL()); err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
		return refuse("KubeletAPIServer", "%q is not an https://host:port URL of the API server", c.KubeletAPIServerURL())
	}
	if len(c.KubeletClusterDNS) > 0 && c.KubeJoinMode != JoinModeKubelet {
		return refuse("KubeletClusterDNS", "set in the k3s join mode: k3s's agents take the cluster DNS from the k3s server (its --cluster-dns); unset %s", c.Name("KubeletClusterDNS"))
	}
	for _, addr := range c.KubeletClusterDNS {
		if addr != c.MasterVPNIP {
			return refuse("KubeletClusterDNS", "%s is not %s %s: machines reach the cluster's DNS through their tunnels (they run no kube-proxy, so a Service's cluster IP does not answer), and any other address of the tunnels' ranges can be a joined machine's, which would then answer every pod's names; run the DNS server (CoreDNS, say) on %[2]s", addr, c.Name("MasterVPNIP"), c.MasterVPNIP)
		}
	}
	if !api.ClusterDomain.MatchString(c.ClusterDomain) || len(c.ClusterDomain) > 253 {
		return refuse("ClusterDomain", "%q is not a DNS domain such as cluster.local", c.ClusterDomain)
	}
	if c.ClusterDomain != "cluster.local" && c.KubeJoinMode != JoinModeKubelet {
		return refuse("ClusterDomain", "set in the k3s join mode: k3s's agents take the cluster domain from the k3s server; unset %s", c.Name("ClusterDomain"))
	}
	if c.KubeJoinMode == JoinModeKubelet && c.K3sURL != "" {
		return refuse("KubeJoinMode", "kubelet, with %s set: machines join by their own kubelet or by k3s's, not both; unset %[1]s", c.Name("K3sURL"))
	}
	if c.Store != "sqlite" && c.Store != "kubernetes" {
		return refuse("Store", "%q is neither sqlite nor kubernetes", c.Store)
	}
	if c.DBSync != "full" && c.DBSync != "normal" {
		return refuse("DBSync", "%q is neither full nor normal", c.DBSync)
	}
	return nil
}

// UsesTLS reports whether the public listener serves HTTPS: TLS=on, or
// TLS unset outside dev mode.
func (c Config) UsesTLS() bool { return c.TLS == "on" || (c.TLS == "" && !c.Dev) }

// ConsoleLoopbackOnly reports whether the public listener serves the web
// console to loopback callers only: it serves HTTPS with the pair the
// server made itself (no TLSCertFile), which no browser can verify, and
// ConsolePublic is off.
func (c Config) ConsoleLoopbackOnly() bool {
	return c.UsesTLS() && c.TLSCertFile == "" && !c.ConsolePublic
}

// MinSecretLen is the shortest JWTSecret accepted outside dev mode.
const MinSecretLen = 32

// CheckJWTSecret refuses, outside dev mode, a JWT secret that is the
// default, a placeholder or short: what Check says of JWTSecret alone,
// for a program that stores the secret before the rest of the
// configuration is complete.
func (c Config) CheckJWTSecret() error {
	if c.Dev {
		return nil
	}
	switch {
	case placeholder(c.JWTSecret):
		return refuse("JWTSecret", "is a placeholder from the documentation; generate a secret (openssl rand -hex 32)")
	case c.JWTSecret == DefaultJWTSecret:
		return refuse("JWTSecret", "is the published default; set a random secret of at least 32 bytes (or start in dev mode, %s)", c.Name("Dev"))
	case len(c.JWTSecret) < MinSecretLen:
		return refuse("JWTSecret", "is %d bytes; use at least %d random bytes", len(c.JWTSecret), MinSecretLen)
	}
	return nil
}

// Check refuses unsafe settings outside dev mode, each with a
// *SettingError naming it: the default, a placeholder or a short JWT
// secret, an empty, placeholder or short admin token, a placeholder or
// short internal token.
func (c Config) Check() error {
	if c.Dev {
		return nil
	}
	if err := c.CheckJWTSecret(); err != nil {
		return err
	}
	for _, secret := range []struct{ field, value string }{{"AdminToken", c.AdminToken}, {"InternalToken", c.InternalToken}} {
		if placeholder(secret.value) {
			return refuse(secret.field, "is a placeholder from the documentation; generate a secret (openssl rand -hex 32)")
		}
	}
	switch {
	case c.AdminToken == "":
		return refuse("AdminToken", "is empty; set a random token (or start in dev mode, %s)", c.Name("Dev"))
	case len(c.AdminToken) < 16:
		return refuse("AdminToken", "is shorter than 16 characters; use a long random token")
	case c.InternalToken != "" && len(c.InternalToken) < MinSecretLen:
		return refuse("InternalToken", "is %d characters; use at least %d random characters", len(c.InternalToken), MinSecretLen)
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

// checkReplicaAddr refuses a replica address the other replicas cannot
// dial.
func (c Config) checkReplicaAddr() error {
	if c.ReplicaAddr == "" {
		return errors.New("not set: with several replicas only the leader writes the ledger, and the others hand it their writes at this host:port (the HA Deployment sets $(HUB_IP):8802)")
	}
	host, port, err := net.SplitHostPort(c.ReplicaAddr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", c.ReplicaAddr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port is not a number from 1 to 65535", c.ReplicaAddr)
	}
	if host == "" {
		return fmt.Errorf("%q names no host: the other replicas dial this address, so give one they reach (the pod's IP)", c.ReplicaAddr)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%q: %s is not an address the other replicas can dial; give this replica's own (the pod's IP)", c.ReplicaAddr, host)
	}
	return nil
}

// checkInternalAddr refuses an internal listener every joined node or
// the world would reach: it must name a loopback or private address
// explicitly, not every interface, and not one inside the VPN.
func (c Config) checkInternalAddr() error {
	addr := c.InternalAddr
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
	case c.VPNCIDR.Contains(ip.Unmap()):
		return fmt.Errorf("%q is inside %s %s, where every joined node would reach the CRD and Serve routes without a credential", addr, c.Name("VPNCIDR"), c.VPNCIDR)
	case c.ClusterCIDR.Contains(ip.Unmap()):
		return fmt.Errorf("%q is inside %s %s, the pods' range, which the internal listener refuses", addr, c.Name("ClusterCIDR"), c.ClusterCIDR)
	case !ip.IsLoopback() && !ip.IsPrivate() && !benchmarkRange.Contains(ip.Unmap()):
		return fmt.Errorf("%q is not a loopback or private address; the internal listener has no credentials", addr)
	}
	return nil
}

// benchmarkRange is 198.18.0.0/15, set aside for testing networks (RFC
// 2544) and never routed on the internet: as good as a private range for
// the internal listener (a lab's bridge, the tests' namespaces).
var benchmarkRange = netip.MustParsePrefix("198.18.0.0/15")
