package joinagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// State is a node's identity, kept between runs in the state directory.
type State struct {
	Hostname   string
	PrivateKey wgkey.PrivateKey
	NodeToken  string // empty until the first validate
	VPNIP      string
	// MasterVPNURL is where the master answers through the tunnel (empty:
	// it has no VPN listener); leave tries it first.
	MasterVPNURL string
	// MasterPublicKey and VPNCIDR are the master's peer on the device, for
	// the link service (empty in an identity kept before it existed).
	MasterPublicKey string
	VPNCIDR         string
	// ClusterCIDR and NodeCIDRMask are the cluster's pod range as the
	// master said it at validate: the only pod CIDRs the link service
	// routes (empty in an identity kept before it existed: none then,
	// until the next join).
	ClusterCIDR  string
	NodeCIDRMask int
}

// K3sTokenFile is the file in the state directory that holds the k3s
// agent token for the k3s step (0600, never on a command line); Leave
// removes it.
const K3sTokenFile = "k3s-agent-token"

// stateFile is the file in the state directory; written 0600.
const stateFile = "identity.json"

type stateJSON struct {
	Hostname   string `json:"hostname"`
	PrivateKey string `json:"private_key"`
	NodeToken  string `json:"node_token"`
	VPNIP      string `json:"vpn_ip"`
	MasterVPN  string `json:"master_vpn_url,omitempty"`
	MasterKey  string `json:"master_public_key,omitempty"`
	VPNCIDR    string `json:"vpn_cidr,omitempty"`
	Cluster    string `json:"cluster_cidr,omitempty"`
	NodeMask   int    `json:"node_cidr_mask,omitempty"`
}

// LoadState reads the identity in dir, or makes a new key pair for
// hostname when there is none. A state of another hostname is refused: a
// renamed machine is a new node (leave first).
func LoadState(dir, hostname string) (State, error) {
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		key, err := wgkey.GeneratePrivate()
		if err != nil {
			return State{}, err
		}
		return State{Hostname: hostname, PrivateKey: key}, nil
	}
	if err != nil {
		return State{}, err
	}
	var j stateJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return State{}, fmt.Errorf("joinagent: %s is damaged: %w; remove it to join as a new node", filepath.Join(dir, stateFile), err)
	}
	key, err := wgkey.ParsePrivate(j.PrivateKey)
	if err != nil {
		return State{}, fmt.Errorf("joinagent: %s: private_key: %w", filepath.Join(dir, stateFile), err)
	}
	if j.Hostname != hostname {
		return State{}, fmt.Errorf("joinagent: this machine joined as %q and is now called %q; run with --leave first, then join again", j.Hostname, hostname)
	}
	return State{Hostname: j.Hostname, PrivateKey: key, NodeToken: j.NodeToken, VPNIP: j.VPNIP, MasterVPNURL: j.MasterVPN,
		MasterPublicKey: j.MasterKey, VPNCIDR: j.VPNCIDR, ClusterCIDR: j.Cluster, NodeCIDRMask: j.NodeMask}, nil
}

// PodRange is the cluster's pod range the identity holds; the zero
// PodRange (which admits no pod CIDR) when it holds none or a malformed
// one.
func (s State) PodRange() joinkeys.PodRange {
	cluster, err := netip.ParsePrefix(s.ClusterCIDR)
	r := joinkeys.PodRange{Cluster: cluster, NodeBits: s.NodeCIDRMask}
	if err != nil || r.Validate() != nil {
		return joinkeys.PodRange{}
	}
	return r
}

// save writes the identity atomically, readable by root only.
func (s State) save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(stateJSON{Hostname: s.Hostname, PrivateKey: s.PrivateKey.Base64(), NodeToken: s.NodeToken, VPNIP: s.VPNIP, MasterVPN: s.MasterVPNURL,
		MasterKey: s.MasterPublicKey, VPNCIDR: s.VPNCIDR, Cluster: s.ClusterCIDR, NodeMask: s.NodeCIDRMask}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".identity-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, stateFile))
}

// removeState deletes the identity (nothing secret stays behind) and the
// worker image record.
func removeState(dir string) error {
	var errs []error
	for _, name := range []string{stateFile, imageRecord, K3sTokenFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
