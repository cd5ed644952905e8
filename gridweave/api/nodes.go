package api

import (
	"regexp"
	"time"
)

// HostnameRequest is the body of disconnect and leave.
type HostnameRequest struct {
	Hostname string `json:"hostname" description:"The node's hostname." example:"gpu-node-1"`
}

// MintKeyRequest mints a join key (POST /v1/nodes/join-keys).
type MintKeyRequest struct {
	Kind       string            `json:"kind" enum:"org,provider" description:"org: a random secret; provider: a JWT that also authenticates the provider."`
	Org        string            `json:"org" description:"The organisation the key's nodes join for." example:"acme"`
	TTLSeconds *int64            `json:"ttl_seconds" description:"The key's lifetime in seconds (positive)." example:"3600"`
	Provider   string            `json:"provider,omitempty" description:"A provider key's JWT subject; default org."`
	MaxUses    int               `json:"max_uses,omitempty" description:"How many nodes may join with the key; 0 or left out is no limit."`
	Labels     map[string]string `json:"labels,omitempty" description:"Free-form labels kept with the key."`
}

// MintKeyResponse is a new join key. Key is shown once: it is stored
// hashed.
type MintKeyResponse struct {
	ID          string    `json:"id"`
	Key         string    `json:"key" description:"The secret, shown only here."`
	Kind        string    `json:"kind" enum:"org,provider"`
	Org         string    `json:"org"`
	Provider    *string   `json:"provider" description:"The provider (JWT subject) of a provider key; null for an org key."`
	ExpiresAt   time.Time `json:"expires_at"`
	JoinCommand string    `json:"join_command" description:"What a person pastes on the machine."`
}

// Key is a join key as the list and revoke routes show it, never its
// secret.
type Key struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind" enum:"org,provider"`
	Org       string            `json:"org"`
	Provider  *string           `json:"provider" description:"The provider of a provider key; null for an org key."`
	Labels    map[string]string `json:"labels"`
	CreatedBy string            `json:"created_by" description:"The subject of the admin credential that minted it."`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	MaxUses   int               `json:"max_uses" description:"0 means no limit."`
	Uses      int               `json:"uses"`
	Revoked   bool              `json:"revoked"`
	RevokedAt *time.Time        `json:"revoked_at"`
	LastUsed  *time.Time        `json:"last_used_at"`
}

// KeyList answers GET /v1/nodes/join-keys: a page of keys, oldest first.
type KeyList struct {
	Keys []Key `json:"keys"`
	// Continue is the token of the next page (?continue=); empty on the
	// last page.
	Continue string `json:"continue" description:"The token of the next page (pass it as ?continue=); empty on the last page."`
}

// ValidateRequest is join step 1 (POST /v1/nodes/validate). A first join
// presents Key; a re-join of the same public key presents NodeToken.
type ValidateRequest struct {
	Key       string `json:"key,omitempty" description:"The join key (first join). Required unless node_token is given."`
	Hostname  string `json:"hostname" description:"The node's hostname (a DNS-1123 label, not a route name under /v1/nodes/)." example:"gpu-node-1"`
	PublicKey string `json:"public_key" description:"The node's WireGuard public key (base64, 32 bytes)." example:"xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="`
	Version   string `json:"version" description:"The agent's semantic version; another major version than the server's is refused (426)." example:"1.4.2"`
	NodeToken string `json:"node_token,omitempty" description:"The node token from the first validate (a re-join)."`
}

// ValidateResponse is what a node needs to bring up its tunnel and its
// k3s agent. NodeToken is the node's credential from now on.
type ValidateResponse struct {
	VPNIP           string       `json:"vpn_ip" description:"The node's WireGuard address."`
	MasterVPNIP     string       `json:"master_vpn_ip"`
	VPNCIDR         string       `json:"vpn_cidr"`
	MasterPublicKey string       `json:"master_public_key" description:"The master's WireGuard public key."`
	MasterEndpoint  string       `json:"master_endpoint" description:"host:port of the master's WireGuard listener; empty when the master has no public address."`
	K3sURL          string       `json:"k3s_url" description:"Where the k3s agent joins; empty when the k3s step is off."`
	K3sToken        string       `json:"k3s_token" description:"The k3s agent token (never the server token); empty when the k3s step is off."`
	NodeToken       string       `json:"node_token" description:"The node's own credential: keep it for register, report-version, leave and re-joins."`
	NodeLabels      []string     `json:"node_labels" description:"Labels (key=value) the k3s agent must register the node's Kubernetes Node with: the master labels, routes and deletes only a Node that carries them. The mark in them is this node's alone (an HMAC under the master's secret): keep it private."`
	ClusterCIDR     string       `json:"cluster_cidr" description:"The cluster's pod range: the master and every machine route and allow only pod CIDRs inside it, each no larger than a /node_cidr_mask."`
	NodeCIDRMask    int          `json:"node_cidr_mask" description:"The length of a node's pod CIDR inside cluster_cidr."`
	Kubelet         *KubeletJoin `json:"kubelet" nullable:"true" description:"What the machine's kubelet needs to join a conformant control plane by TLS bootstrapping; null in the k3s join mode."`
	MasterVPNURL    string       `json:"master_vpn_url,omitempty" description:"Where the node calls the master once its tunnel is up (register, report-version, the worker image, leave): plain HTTP on the master's VPN address, through the tunnel. Left out when the master has no VPN listener; the node keeps the public URL then."`
}

// KubeletJoin is what a machine's kubelet needs in the kubelet join mode
// (KUBE_JOIN_MODE=kubelet): the API server through the tunnel, the
// cluster's CA and a short-lived bootstrap token made for this join.
type KubeletJoin struct {
	APIServer      string   `json:"api_server" description:"https:// URL of the API server, reachable through the tunnel."`
	CACertPEM      string   `json:"ca_cert_pem" description:"The cluster CA's certificate, PEM."`
	BootstrapToken string   `json:"bootstrap_token" description:"A bootstrap token (id.secret) made for this join, short-lived; its requests name this machine, and the master approves a client certificate of this machine's name alone."`
	TLSServerName  string   `json:"tls_server_name" description:"The name the API server's certificate is checked against when its certificate does not name the address in api_server; empty: the address itself."`
	ClusterDNS     []string `json:"cluster_dns" description:"Addresses of the cluster's DNS, reachable through the tunnel: the kubelet's clusterDNS, the nameservers of the machine's pods. Empty: pods resolve with the machine's own resolver."`
	ClusterDomain  string   `json:"cluster_domain" example:"cluster.local" description:"The cluster's DNS domain: the kubelet's clusterDomain."`
}

// ClusterDomain is the shape of KubeletJoin.ClusterDomain: a DNS domain
// of lower-case labels, as the kubelet's clusterDomain takes.
var ClusterDomain = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// GPU is one GPU of a node, as the node reports it at register and as
// the ledger shows it.
type GPU struct {
	Index     int    `json:"index" example:"0"`
	Vendor    string `json:"vendor,omitempty" enum:"nvidia,amd" description:"Left out, nvidia (agents that predate AMD support send none); always present in answers."`
	Name      string `json:"name" example:"NVIDIA A100-SXM4-80GB"`
	MemoryMiB int    `json:"memory_mib" example:"81920"`
	UUID      string `json:"uuid"`
}

// RegisterRequest is join step 2 (POST /v1/nodes/register). Key completes
// a reservation that validate made for PublicKey; every later register
// presents NodeToken.
type RegisterRequest struct {
	Key       string `json:"key,omitempty" description:"The join key, to complete the reservation validate made (first join only)."`
	NodeToken string `json:"node_token,omitempty" description:"The node token from validate. Required unless completing a first join with key."`
	Hostname  string `json:"hostname" description:"The node's hostname." example:"gpu-node-1"`
	PublicKey string `json:"public_key,omitempty" description:"The node's WireGuard public key (with key)."`
	Version   string `json:"version" description:"The agent's semantic version." example:"1.4.2"`
	GPUs      []GPU  `json:"gpus,omitempty" description:"The node's GPUs, all of one vendor; none for a CPU-only node."`
}

// RegisterResponse is the registered node and, for a GPU node, the worker
// group it runs a Ray worker of (null for a CPU-only node).
type RegisterResponse struct {
	Node        Node    `json:"node"`
	WorkerGroup *string `json:"worker_group" description:"The worker group the node serves in; null for a CPU-only node."`
}

// DisconnectResponse answers disconnect and leave; Released is false when
// there was nothing left to remove.
type DisconnectResponse struct {
	Hostname string `json:"hostname"`
	Released bool   `json:"released" description:"False when there was nothing left to remove."`
}

// VerifyProviderResponse is what a provider key stands for.
type VerifyProviderResponse struct {
	Org       string    `json:"org"`
	Provider  string    `json:"provider"`
	KeyID     string    `json:"key_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// EmptyRequest is a body of {} (verify-provider).
type EmptyRequest struct{}

// ReportVersionRequest is a node's version report (its node token as
// bearer).
type ReportVersionRequest struct {
	Hostname string `json:"hostname" description:"The node's hostname." example:"gpu-node-1"`
	Version  string `json:"version" description:"The agent's semantic version." example:"1.4.3"`
}

// Node is a machine in the ledger.
type Node struct {
	Hostname      string      `json:"hostname"`
	PublicKey     string      `json:"public_key"`
	VPNIP         string      `json:"vpn_ip"`
	Org           string      `json:"org"`
	JoinKeyID     string      `json:"join_key_id"`
	Version       string      `json:"version"`
	Status        string      `json:"status" enum:"validated,registered,disconnected" description:"validated after validate, registered after register, disconnected while it is being removed."`
	GPUs          []GPU       `json:"gpus"`
	PodCIDR       *string     `json:"pod_cidr" description:"The pod CIDR Kubernetes gave the node; null until it has one."`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	RegisteredAt  *time.Time  `json:"registered_at"`
	LastSeen      *time.Time  `json:"last_seen"`
	LastHandshake *time.Time  `json:"last_handshake" description:"The last WireGuard handshake of the node's tunnel with the master's device; null for never (or a mesh that does not observe its peers)."`
	Online        bool        `json:"online" description:"The tunnel handshook with the master within the last 5 minutes (a live tunnel, kept alive every 25 s, renews its handshake every 2)."`
	WorkerGroup   *string     `json:"worker_group" description:"The Ray worker group (GPU pool) of a GPU node; null for a CPU-only node."`
	VersionBehind bool        `json:"version_behind" description:"The node's agent has an older major version than the server's: re-run the join command to update it."`
	Links         *LinkCounts `json:"links" nullable:"true" description:"The node's links to the other nodes as its agent last reported them; null until it reports (an agent that runs no link service never does)."`
}

// LinkCounts summarises a node's links by state.
type LinkCounts struct {
	Direct     int       `json:"direct" description:"Links whose WireGuard handshake with the other node completed: packets go machine to machine."`
	Relayed    int       `json:"relayed" description:"Links that go through the master (the other node could not be reached directly)."`
	Connecting int       `json:"connecting" description:"Links trying a direct handshake (for at most the handshake bound, then relayed)."`
	ReportedAt time.Time `json:"reported_at" description:"When the agent reported them."`
}

// LinkState is where a link between two nodes is: direct (a WireGuard
// handshake between the two completed), relayed (through the master) or
// connecting (a direct handshake is being tried; packets already go
// to the peer directly).
type LinkState string

// The link states.
const (
	LinkDirect     LinkState = "direct"
	LinkRelayed    LinkState = "relayed"
	LinkConnecting LinkState = "connecting"
)

// RelayedReason says why a link is relayed through the master.
type RelayedReason string

// The reasons a link is relayed.
const (
	// RelayedNoCandidate: the directory names no endpoint of the other
	// node to try (the master has not seen its packets yet, and it
	// reported none).
	RelayedNoCandidate RelayedReason = "no_candidate"
	// RelayedSymmetricNAT: this node or the other sits behind a NAT that
	// maps a port to another public port for each destination, so neither
	// can tell the other where to send.
	RelayedSymmetricNAT RelayedReason = "symmetric_nat"
	// RelayedProbesTimedOut: handshakes were tried at the other node's
	// endpoints and none completed (a firewall, a NAT that filters, no
	// route).
	RelayedProbesTimedOut RelayedReason = "probes_timed_out"
	// RelayedHubOnly: this node's agent links nothing directly
	// (--hub-only).
	RelayedHubOnly RelayedReason = "hub_only"
	// RelayedIdle: the agent links on demand (--direct-links on-demand)
	// and the two nodes exchanged no traffic lately; the direct link
	// comes up when traffic starts.
	RelayedIdle RelayedReason = "idle"
)

// NATMapping is how a node's NAT maps its UDP ports, as the node's probe
// of the master's reflexive-address service found it.
type NATMapping string

// The NAT mappings a node reports.
const (
	// NATNone: no NAT between the node and the master.
	NATNone NATMapping = "none"
	// NATEndpointIndependent: one public address and port for every
	// destination; another node can reach the port the master sees.
	NATEndpointIndependent NATMapping = "endpoint_independent"
	// NATEndpointDependent: another public port for each destination (a
	// symmetric NAT).
	NATEndpointDependent NATMapping = "endpoint_dependent"
	// NATUnknown: the probe got too few answers to tell.
	NATUnknown NATMapping = "unknown"
)

// Link is one node's view of its link to another node.
type Link struct {
	Hostname      string        `json:"hostname" description:"The other node."`
	PublicKey     string        `json:"public_key" description:"The other node's WireGuard public key."`
	State         LinkState     `json:"state" enum:"direct,relayed,connecting"`
	RelayedReason RelayedReason `json:"relayed_reason,omitempty" enum:"no_candidate,symmetric_nat,probes_timed_out,hub_only,idle" description:"Why the link is relayed through the master; only when state is relayed."`
	Endpoint      string        `json:"endpoint" description:"host:port the node sends to for a direct link (empty when it knows none)."`
	LastHandshake *time.Time    `json:"last_handshake" description:"The last completed direct handshake; null for never."`
	RxBytes       int64         `json:"rx_bytes" description:"Bytes received from the other node over the direct link."`
	TxBytes       int64         `json:"tx_bytes" description:"Bytes sent to the other node over the direct link."`
}

// LinksReport is a node agent's report of its links (POST
// /v1/nodes/links, its node token as bearer).
type LinksReport struct {
	Hostname   string     `json:"hostname" description:"The reporting node." example:"gpu-node-1"`
	ListenPort int        `json:"listen_port,omitempty" description:"The port the node's WireGuard device listens on."`
	Endpoints  []string   `json:"endpoints,omitempty" description:"host:port where the node says it can be reached besides the address the master sees it from (at most 8): its own addresses at its WireGuard port, and any it was told to advertise."`
	NAT        NATMapping `json:"nat,omitempty" enum:"none,endpoint_independent,endpoint_dependent,unknown" description:"How the node's NAT maps its UDP ports, as its probe of the directory's reflexive_endpoints found it; empty when it has not probed."`
	Links      []Link     `json:"links" description:"One entry per other node, at most 3000 (MaxLinksPerReport): an agent with more peers reports its direct, connecting and busy relayed links first."`
}

// MaxLinksPerReport bounds a LinksReport's links, so that a report stays
// under the default body limit (1 MiB, about 250 bytes a link).
const MaxLinksPerReport = 3000

// LinksAccepted answers a links report: what the master counted.
type LinksAccepted struct {
	Hostname string     `json:"hostname"`
	Counts   LinkCounts `json:"counts"`
}

// NodeLinks answers GET /v1/nodes/{hostname}/links: the node's last report.
type NodeLinks struct {
	Hostname   string     `json:"hostname"`
	ReportedAt *time.Time `json:"reported_at" description:"When the node's agent last reported; null when it never did since the server started."`
	Counts     LinkCounts `json:"counts"`
	Links      []Link     `json:"links"`
	NAT        NATMapping `json:"nat,omitempty" enum:"none,endpoint_independent,endpoint_dependent,unknown" description:"How the node's NAT maps its ports, as its last report said."`
	Endpoints  []string   `json:"endpoints,omitempty" description:"The endpoints its last report named (its own addresses, those it advertises) that the master kept."`
}

// PeerDirectory answers GET /v1/nodes/peers: every node a node may link
// to, and the revision to wait on for the next change.
type PeerDirectory struct {
	Revision string          `json:"revision" description:"Opaque; pass it as ?since= to wait until the directory differs from this one."`
	Peers    []DirectoryPeer `json:"peers" description:"Every node with a tunnel, the caller included, by hostname. A node missing from one answer to the next has gone: remove its peer. In a delta, only the nodes added or changed since the revision asked about."`
	// Delta and Removed answer ?delta=true: the changes since ?since=.
	Delta   bool     `json:"delta,omitempty" description:"True: this answer holds the changes since the revision ?since= named (peers added or changed, removed gone), not the whole directory. Only with ?delta=true, and only when the server still knows that revision; otherwise the whole directory."`
	Removed []string `json:"removed,omitempty" description:"In a delta, the hostnames of the nodes gone since the revision ?since= named: remove their peers."`
	// MasterEndpoint moves when another server replica takes the
	// WireGuard device over.
	ClusterCIDR        string   `json:"cluster_cidr" description:"The cluster's pod range, as validate says it: only pod CIDRs inside it are routed."`
	NodeCIDRMask       int      `json:"node_cidr_mask" description:"The length of a node's pod CIDR inside cluster_cidr."`
	MasterEndpoint     string   `json:"master_endpoint,omitempty" description:"host:port where the master's WireGuard device is reached now (as validate's master_endpoint); with several server replicas it moves to the new leader's when one takes over: set it as the master peer's endpoint. Absent when the master has no public address."`
	ReflexiveEndpoints []string `json:"reflexive_endpoints,omitempty" description:"host:port of the master's reflexive-address service (STUN binding requests), two ports at master_endpoint's address: a node asks both from one socket, and a different answer from each means its NAT maps per destination. Absent when the service is off."`
}

// DirectoryPeer is one node as the other nodes configure it.
type DirectoryPeer struct {
	Hostname  string     `json:"hostname"`
	PublicKey string     `json:"public_key"`
	VPNIP     string     `json:"vpn_ip"`
	PodCIDR   string     `json:"pod_cidr" description:"The node's pod CIDR; empty until Kubernetes gave it one."`
	Endpoints []string   `json:"endpoints" description:"host:port to try for a direct link: the address the master's WireGuard device sees the node's packets come from, then the ones the node reported."`
	NAT       NATMapping `json:"nat,omitempty" enum:"none,endpoint_independent,endpoint_dependent,unknown" description:"How the node's NAT maps its ports, as it reported; empty when it has not."`
}

// NodeEnvelope answers GET /v1/nodes/{hostname} and report-version.
type NodeEnvelope struct {
	Node Node `json:"node"`
}

// NodeList answers GET /v1/nodes: a page of nodes, by hostname.
type NodeList struct {
	Nodes []Node `json:"nodes"`
	// Continue is the token of the next page (?continue=); empty on the
	// last page.
	Continue string `json:"continue" description:"The token of the next page (pass it as ?continue=); empty on the last page."`
}

// AuditEvent is one entry of the ledger's audit trail.
type AuditEvent struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Type   string    `json:"type" enum:"key_minted,key_revoked,validation_accepted,validation_rejected,node_registered,node_disconnected,node_released,version_reported"`
	KeyID  string    `json:"key_id" description:"The join key involved; empty when none."`
	Actor  string    `json:"actor" description:"Who: the caller's address for the join steps, the admin's subject or the node's for the others."`
	Reason string    `json:"reason" description:"Why (a refusal), or what happened."`
}

// AuditList answers GET /v1/nodes/{hostname}/audit, oldest first.
type AuditList struct {
	Events []AuditEvent `json:"events"`
}

// NodeCondition is one condition of a Kubernetes Node.
type NodeCondition struct {
	Type               string    `json:"type" example:"Ready"`
	Status             string    `json:"status" enum:"True,False,Unknown"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"last_transition_time"`
}

// KubernetesNode answers GET /v1/nodes/{hostname}/kubernetes: the node's
// Kubernetes Node as the cluster holds it.
type KubernetesNode struct {
	Hostname      string          `json:"hostname"`
	Exists        bool            `json:"exists" description:"False until the node's k3s agent registered its Node."`
	Owned         bool            `json:"owned" description:"Whether the Node is this node's own (registered with its mark): a Node of the same name that another machine, an earlier join or an administrator made is shown, but is not the node's, and the master routes, labels and drains none of it."`
	Unschedulable bool            `json:"unschedulable"`
	PodCIDR       string          `json:"pod_cidr"`
	Conditions    []NodeCondition `json:"conditions"`
}

// FleetSample is the fleet at one moment.
type FleetSample struct {
	At     time.Time      `json:"at"`
	Nodes  int            `json:"nodes" description:"Registered nodes."`
	Online int            `json:"online" description:"Registered nodes whose tunnel handshook within 5 minutes."`
	GPUs   map[string]int `json:"gpus" description:"GPUs of online nodes by worker pool."`
}

// FleetHistory answers GET /v1/nodes/history: a sample a minute over the
// last six hours, oldest first (kept in memory since the server started).
type FleetHistory struct {
	Samples []FleetSample `json:"samples"`
}
