package api

import "time"

// HostnameRequest is the body of disconnect and leave.
type HostnameRequest struct {
	Hostname string `json:"hostname"`
}

// MintKeyRequest mints a join key (POST /v1/nodes/join-keys).
type MintKeyRequest struct {
	// Kind is "org" (a random secret) or "provider" (a JWT that also
	// authenticates the provider).
	Kind string `json:"kind"`
	// Org is the organisation the key's nodes join for.
	Org string `json:"org"`
	// TTLSeconds is the key's lifetime; required and positive.
	TTLSeconds *int64 `json:"ttl_seconds"`
	// Provider is a provider key's JWT subject; default Org.
	Provider string `json:"provider,omitempty"`
	// MaxUses limits how often the key is spent; 0 is no limit.
	MaxUses int `json:"max_uses,omitempty"`
	// Labels are kept with the key.
	Labels map[string]string `json:"labels,omitempty"`
}

// MintKeyResponse is a new join key. Key is shown once: it is stored
// hashed.
type MintKeyResponse struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Kind      string    `json:"kind"`
	Org       string    `json:"org"`
	Provider  *string   `json:"provider"`
	ExpiresAt time.Time `json:"expires_at"`
	// JoinCommand is what a person pastes on the machine.
	JoinCommand string `json:"join_command"`
}

// Key is a join key as the list and revoke routes show it, never its
// secret.
type Key struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Org       string            `json:"org"`
	Provider  *string           `json:"provider"`
	Labels    map[string]string `json:"labels"`
	CreatedBy string            `json:"created_by"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	MaxUses   int               `json:"max_uses"`
	Uses      int               `json:"uses"`
	Revoked   bool              `json:"revoked"`
	RevokedAt *time.Time        `json:"revoked_at"`
	LastUsed  *time.Time        `json:"last_used_at"`
}

// KeyList answers GET /v1/nodes/join-keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// ValidateRequest is join step 1 (POST /v1/nodes/validate). A first join
// presents Key; a re-join of the same public key presents NodeToken.
type ValidateRequest struct {
	Key       string `json:"key,omitempty"`
	Hostname  string `json:"hostname"`
	PublicKey string `json:"public_key"`
	Version   string `json:"version"`
	NodeToken string `json:"node_token,omitempty"`
}

// ValidateResponse is what a node needs to bring up its tunnel and its
// k3s agent. NodeToken is the node's credential from now on.
type ValidateResponse struct {
	VPNIP           string `json:"vpn_ip"`
	MasterVPNIP     string `json:"master_vpn_ip"`
	VPNCIDR         string `json:"vpn_cidr"`
	MasterPublicKey string `json:"master_public_key"`
	MasterEndpoint  string `json:"master_endpoint"`
	K3sURL          string `json:"k3s_url"`
	K3sToken        string `json:"k3s_token"`
	NodeToken       string `json:"node_token"`
}

// GPU is one GPU a node reports at register.
type GPU struct {
	Index int `json:"index"`
	// Vendor is "nvidia" or "amd"; left out it is "nvidia" (agents older
	// than AMD support send none).
	Vendor    string `json:"vendor"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	UUID      string `json:"uuid"`
}

// RegisterRequest is join step 2 (POST /v1/nodes/register). Key completes
// a reservation that validate made for PublicKey; every later register
// presents NodeToken.
type RegisterRequest struct {
	Key       string `json:"key,omitempty"`
	NodeToken string `json:"node_token,omitempty"`
	Hostname  string `json:"hostname"`
	PublicKey string `json:"public_key,omitempty"`
	Version   string `json:"version"`
	GPUs      []GPU  `json:"gpus"`
}

// RegisterResponse is the registered node and, for a GPU node, the worker
// group it runs a Ray worker of (null for a CPU-only node).
type RegisterResponse struct {
	Node        Node    `json:"node"`
	WorkerGroup *string `json:"worker_group"`
}

// DisconnectResponse answers disconnect and leave; Released is false when
// there was nothing left to remove.
type DisconnectResponse struct {
	Hostname string `json:"hostname"`
	Released bool   `json:"released"`
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
	Hostname string `json:"hostname"`
	Version  string `json:"version"`
}

// Node is a machine in the ledger.
type Node struct {
	Hostname  string `json:"hostname"`
	PublicKey string `json:"public_key"`
	VPNIP     string `json:"vpn_ip"`
	Org       string `json:"org"`
	JoinKeyID string `json:"join_key_id"`
	Version   string `json:"version"`
	// Status is "validated", "registered" or "disconnected".
	Status       string     `json:"status"`
	GPUs         []GPU      `json:"gpus"`
	PodCIDR      *string    `json:"pod_cidr"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	RegisteredAt *time.Time `json:"registered_at"`
	LastSeen     *time.Time `json:"last_seen"`
}

// NodeEnvelope answers GET /v1/nodes/{hostname} and report-version.
type NodeEnvelope struct {
	Node Node `json:"node"`
}

// NodeList answers GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}
