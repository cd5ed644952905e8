package joinagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// DirectLinks is which nodes the link service links directly.
type DirectLinks string

// The choices of DirectLinks.
const (
	DirectLinksAuto     DirectLinks = "auto"
	DirectLinksAll      DirectLinks = "all"
	DirectLinksOnDemand DirectLinks = "on-demand"
)

// OnDemandAbove is how many other nodes DirectLinksAuto links to in
// full: above it, links are made on demand.
const OnDemandAbove = 100

// Options configure Join and Leave. Master and StateDir are required; the
// rest default as documented.
type Options struct {
	// Master is the master's base URL, e.g. https://203.0.113.7:8800.
	Master string
	// MasterPin pins the master's certificate ("sha256//<base64>", the
	// MASTER_PIN of the join command): every HTTPS call accepts only the
	// key it names (tlspin). Empty: an https Master is checked against the
	// system's CAs, an http one is plain (a master in dev mode or TLS=off).
	MasterPin string
	// StateDir keeps the node's identity (0600); e.g. /var/lib/gridweave.
	StateDir string
	// Key is the join key; needed for the first join only.
	Key string
	// Hostname is the node's name; default os.Hostname, lower-cased.
	Hostname string
	// Version is this agent's version, checked by the master's gate.
	Version string
	// Tunnel brings the WireGuard tunnel up and down; default a
	// WireGuardTunnel on device "gridweave0".
	Tunnel Tunnel
	// K3sAgent runs the k3s agent step with what the join gives it (the
	// URL and agent token the master sent, the node's VPN address, its
	// name and the labels the master needs on its Node; see K3sJoin);
	// nil skips the step (the master said nothing about k3s, or the
	// machine is set up otherwise).
	K3sAgent func(ctx context.Context, join K3sJoin) error
	// K3sBinary is where k3s lives on the machine (e.g.
	// /usr/local/bin/k3s): when it is missing there, Join installs the
	// master's (GET /v1/nodes/agent/{os}/{arch}/k3s, its SHA-256 checked)
	// before the k3s step. Empty: never installed.
	K3sBinary string
	// KubeletAgent runs the kubelet join mode's step (a master whose
	// validate answers a kubelet field): the machine's own containerd and
	// kubelet, the kubelet TLS-bootstrapped with the token the master made
	// for this join (see KubeletJoin). nil: a master of that mode is
	// refused (this agent cannot join its cluster).
	KubeletAgent func(ctx context.Context, join KubeletJoin) error
	// KubeletBinary is where the master's kubelet is installed (GET
	// /v1/nodes/agent/{os}/{arch}/kubelet, its SHA-256 checked; replaced
	// when the master's changed), e.g. /var/lib/gridweave/node/bin/kubelet.
	KubeletBinary string
	// Images makes the master's GPU worker image present in the node's
	// container runtime (GET /v1/nodes/worker-image); nil skips the step.
	// KubeletImages replaces it in the kubelet join mode (the node's own
	// containerd).
	Images        ImageRuntime
	KubeletImages ImageRuntime
	// ImageImportWait bounds the retries of a failing import (the runtime
	// may still be starting); default one minute.
	ImageImportWait time.Duration
	// DetectGPUs reports the GPUs; default gpus.Detect.
	DetectGPUs func(ctx context.Context) ([]gpus.GPU, error)
	// HTTPClient talks to the master; default one with a 30 s timeout
	// that pins MasterPin. A client given here is used as it is.
	HTTPClient *http.Client
	// Logger receives one line per step; default discards.
	Logger *slog.Logger

	// The link service (Serve):
	//
	// AdvertiseEndpoints are where this node's WireGuard device can be
	// reached besides the address the master sees it from (a LAN
	// address with the device's port, a port forwarded on a NAT).
	AdvertiseEndpoints []netip.AddrPort
	// HubOnly links to no node directly: everything goes through the
	// master, as before direct links.
	HubOnly bool
	// DirectLinks is which nodes get a direct link: DirectLinksAuto (the
	// default) links on demand while the directory names more than
	// OnDemandAbove other nodes and every node otherwise,
	// DirectLinksAll every node, DirectLinksOnDemand only those this
	// machine exchanges traffic with (its connection tracking), each
	// dropped after IdleAfter without (default 5 min).
	DirectLinks DirectLinks
	IdleAfter   time.Duration
	// HandshakeTimeout is how long a direct link may try before the node
	// goes through the master; default 15 s.
	HandshakeTimeout time.Duration
	// ReportInterval is how often the links are reported to the master
	// at least (a change of state, and the master's return, are reported
	// at once); default 30 s.
	ReportInterval time.Duration
}

// K3sJoin is what the k3s agent step needs to register the machine's
// Kubernetes Node: the server URL and agent token, the node's VPN
// address (k3s's --node-ip), its name (--node-name) and the labels the
// master needs on its Node (--node-label; the master touches only a Node
// that carries them).
type K3sJoin struct {
	URL, Token string
	NodeIP     netip.Addr
	NodeName   string
	NodeLabels []string
}

// KubeletJoin is what the kubelet join mode's step needs: the API server
// through the tunnel, the cluster CA, the bootstrap token the master made
// for this join (and the name the API server's certificate carries, when
// it does not name that address); the node's name, VPN address (the
// kubelet's --node-ip, which the API server reaches it at) and the labels
// the master needs on its Node; the cluster's pod range and the length of
// a node's pod CIDR; the kubelet the master served; the cluster's DNS
// (through the tunnel) and domain.
type KubeletJoin struct {
	APIServer, CACertPEM, BootstrapToken, TLSServerName string
	NodeName                                            string
	NodeIP                                              netip.Addr
	NodeLabels                                          []string
	ClusterCIDR                                         netip.Prefix
	NodeCIDRMask                                        int
	Kubelet                                             string
	ClusterDNS                                          []netip.Addr
	ClusterDomain                                       string
}

// Result is what a join achieved.
type Result struct {
	Hostname    string
	VPNIP       netip.Addr
	WorkerGroup string // empty for a CPU-only node
	GPUs        int
	Rejoined    bool // the node token, not the key, admitted it
}

// ErrMaster wraps an answer of the master that is not 2xx; *MasterError
// carries it.
var ErrMaster = errors.New("the master refused")

// MasterError is a non-2xx answer of the master, in the contract's shape.
type MasterError struct {
	Step    string // validate, register, report-version, leave
	Status  int
	Code    string
	Message string
}

func (e *MasterError) Error() string {
	return fmt.Sprintf("%s: the master answered %d %s: %s", e.Step, e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrMaster) hold.
func (e *MasterError) Is(target error) bool { return target == ErrMaster }

func (o *Options) defaults() error {
	if o.Master == "" || o.StateDir == "" {
		return errors.New("joinagent: Options need Master and StateDir")
	}
	o.Master = strings.TrimRight(o.Master, "/")
	if o.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		o.Hostname = strings.ToLower(strings.SplitN(h, ".", 2)[0])
	}
	if err := joinkeys.ValidateHostname(o.Hostname); err != nil {
		return fmt.Errorf("joinagent: this machine's hostname cannot name a node: %w", err)
	}
	if o.Tunnel == nil {
		o.Tunnel = &WireGuardTunnel{Interface: "gridweave0"}
	}
	if o.DetectGPUs == nil {
		o.DetectGPUs = func(ctx context.Context) ([]gpus.GPU, error) { return gpus.Detect(ctx, nil) }
	}
	if o.ImageImportWait == 0 {
		o.ImageImportWait = time.Minute
	}
	if o.MasterPin != "" && !strings.HasPrefix(o.Master, "https://") {
		return fmt.Errorf("joinagent: a pinned master is reached over https, not %s", o.Master)
	}
	if o.MasterPin != "" && o.HTTPClient != nil {
		return errors.New("joinagent: MasterPin and HTTPClient together: the pin is applied to the default client only; pin in your client's TLS configuration (tlspin.ClientConfig) and leave MasterPin empty")
	}
	if o.HTTPClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		if o.MasterPin != "" {
			pin, err := tlspin.Parse(o.MasterPin)
			if err != nil {
				return fmt.Errorf("joinagent: the master's pin: %w", err)
			}
			transport.TLSClientConfig = tlspin.ClientConfig(pin)
		}
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: transport}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Join runs the whole join: identity, validate, tunnel, k3s, worker
// image, GPUs, register, version report. Running it again converges: the same key
// pair and node token, so the same VPN address.
func Join(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	st, err := LoadState(o.StateDir, o.Hostname)
	if err != nil {
		return Result{}, err
	}
	pub, err := st.PrivateKey.Public()
	if err != nil {
		return Result{}, err
	}
	req := api.ValidateRequest{Hostname: o.Hostname, PublicKey: pub.String(), Version: o.Version}
	rejoin := st.NodeToken != ""
	if rejoin {
		req.NodeToken = st.NodeToken
	} else {
		if o.Key == "" {
			return Result{}, errors.New("joinagent: a first join needs the join key")
		}
		req.Key = o.Key
	}
	var v api.ValidateResponse
	err = o.post(ctx, "validate", "/v1/nodes/validate", "", req, &v)
	var me *MasterError
	if rejoin && o.Key != "" && errors.As(err, &me) && me.Status == http.StatusUnauthorized && me.Code == api.CodeInvalidNodeToken {
		// The master released this machine (a disconnect, or a leave
		// whose answer was lost): the join command's key joins it afresh.
		o.Logger.InfoContext(ctx, "the master no longer knows this machine's node token (it was disconnected): joining afresh with the key", "hostname", o.Hostname)
		rejoin, req.NodeToken, req.Key = false, "", o.Key
		err = o.post(ctx, "validate", "/v1/nodes/validate", "", req, &v)
	}
	if err != nil {
		return Result{}, err
	}
	st.NodeToken, st.VPNIP, st.MasterPublicKey, st.VPNCIDR = v.NodeToken, v.VPNIP, v.MasterPublicKey, v.VPNCIDR
	st.ClusterCIDR, st.NodeCIDRMask = v.ClusterCIDR, v.NodeCIDRMask
	if st.MasterVPNURL, err = vpnURL(v); err != nil {
		return Result{}, err
	}
	// The identity is kept before anything else happens: a run that fails
	// later re-joins with the token and keeps its address.
	if err := st.save(o.StateDir); err != nil {
		return Result{}, fmt.Errorf("joinagent: keep the node's identity: %w", err)
	}
	o.Logger.InfoContext(ctx, "validated", "hostname", o.Hostname, "vpn_ip", v.VPNIP, "rejoin", rejoin)

	cfg, err := tunnelConfig(st.PrivateKey, v)
	if err != nil {
		return Result{}, err
	}
	if err := o.Tunnel.Up(ctx, cfg); err != nil {
		return Result{}, fmt.Errorf("joinagent: bring up the tunnel: %w", err)
	}
	o.Logger.InfoContext(ctx, "tunnel up", "address", cfg.Address, "master", cfg.MasterEndpoint)
	if st.MasterVPNURL != "" {
		// From here on the master is called through the tunnel, which
		// WireGuard authenticates and encrypts.
		o.Master, o.HTTPClient = st.MasterVPNURL, o.tunnelClient()
	}
	images := o.Images
	if v.Kubelet != nil {
		if err := o.kubeletStep(ctx, v, cfg); err != nil {
			return Result{}, fmt.Errorf("joinagent: the kubelet step: %w", err)
		}
		images = o.KubeletImages
	} else if o.K3sAgent != nil && v.K3sURL == "" {
		o.Logger.InfoContext(ctx, "the master runs no k3s step (no K3S_URL): this machine joins the mesh and the ledger, not Kubernetes")
	}
	if v.Kubelet == nil && o.K3sAgent != nil && v.K3sURL != "" {
		if o.K3sBinary != "" {
			if err := o.installK3s(ctx); err != nil {
				return Result{}, fmt.Errorf("joinagent: the k3s step: %w", err)
			}
		}
		join := K3sJoin{URL: v.K3sURL, Token: v.K3sToken, NodeIP: cfg.Address.Addr(), NodeName: o.Hostname, NodeLabels: v.NodeLabels}
		if err := o.K3sAgent(ctx, join); err != nil {
			return Result{}, fmt.Errorf("joinagent: the k3s agent step: %w", err)
		}
	}
	if images != nil {
		if err := o.workerImage(ctx, images); err != nil {
			return Result{}, fmt.Errorf("joinagent: the worker image step: %w", err)
		}
	}
	found, err := o.DetectGPUs(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("joinagent: detect GPUs (fix the GPU driver, or join this machine as CPU-only on purpose): %w", err)
	}
	var reg api.RegisterResponse
	body := api.RegisterRequest{NodeToken: st.NodeToken, Hostname: o.Hostname, PublicKey: pub.String(), Version: o.Version, GPUs: gpus.Reports(found)}
	if err := o.post(ctx, "register", "/v1/nodes/register", "", body, &reg); err != nil {
		return Result{}, err
	}
	if err := o.post(ctx, "report-version", "/v1/nodes/report-version", st.NodeToken, api.ReportVersionRequest{Hostname: o.Hostname, Version: o.Version}, nil); err != nil {
		return Result{}, err
	}
	res := Result{Hostname: o.Hostname, VPNIP: cfg.Address.Addr(), GPUs: len(found), Rejoined: rejoin}
	if reg.WorkerGroup != nil {
		res.WorkerGroup = *reg.WorkerGroup
	}
	o.Logger.InfoContext(ctx, "registered", "hostname", o.Hostname, "gpus", len(found), "worker_group", res.WorkerGroup)
	return res, nil
}

// kubeletStep installs the master's kubelet and runs the kubelet step
// with what validate gave.
func (o *Options) kubeletStep(ctx context.Context, v api.ValidateResponse, cfg TunnelConfig) error {
	if o.KubeletAgent == nil || o.KubeletBinary == "" {
		return errors.New("the master joins machines to Kubernetes by their own kubelet (KUBE_JOIN_MODE=kubelet), and this agent has no kubelet step")
	}
	k := v.Kubelet
	if u, err := url.Parse(k.APIServer); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("the master's validate answer: kubelet.api_server %q is not an https:// URL", k.APIServer)
	}
	if k.BootstrapToken == "" || k.CACertPEM == "" {
		return errors.New("the master's validate answer: kubelet lacks bootstrap_token or ca_cert_pem")
	}
	cluster, err := netip.ParsePrefix(v.ClusterCIDR)
	if err != nil {
		return fmt.Errorf("the master's validate answer: cluster_cidr %q: %w", v.ClusterCIDR, err)
	}
	// The pods' DNS is the master's, at its VPN address through the
	// tunnel: no other machine's address is taken.
	var dns []netip.Addr
	for _, raw := range k.ClusterDNS {
		a, err := netip.ParseAddr(raw)
		if err != nil || a.String() != v.MasterVPNIP {
			return fmt.Errorf("the master's validate answer: kubelet.cluster_dns %q is not the master's VPN address %s", raw, v.MasterVPNIP)
		}
		dns = append(dns, a)
	}
	if k.ClusterDomain != "" && !api.ClusterDomain.MatchString(k.ClusterDomain) {
		return fmt.Errorf("the master's validate answer: kubelet.cluster_domain %q is not a DNS domain", k.ClusterDomain)
	}
	installed, err := o.installFromMaster(ctx, "kubelet", o.KubeletBinary, true)
	if err != nil {
		return err
	}
	if !installed {
		return fmt.Errorf("the master serves no kubelet for %s/%s (KUBELET_BINARY on the master), and there is none at %s", runtime.GOOS, runtime.GOARCH, o.KubeletBinary)
	}
	return o.KubeletAgent(ctx, KubeletJoin{APIServer: k.APIServer, CACertPEM: k.CACertPEM, BootstrapToken: k.BootstrapToken, TLSServerName: k.TLSServerName,
		NodeName: o.Hostname, NodeIP: cfg.Address.Addr(), NodeLabels: v.NodeLabels, ClusterCIDR: cluster, NodeCIDRMask: v.NodeCIDRMask, Kubelet: o.KubeletBinary,
		ClusterDNS: dns, ClusterDomain: k.ClusterDomain})
}

// Leave takes the node out of the cluster: the master releases it (peer,
// worker, Node, address, hostname), the tunnel goes down, and the
// identity is deleted. Leaving a node that never joined is not an error.
func Leave(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	st, err := LoadState(o.StateDir, o.Hostname)
	if err != nil {
		return err
	}
	if st.NodeToken != "" {
		err := o.leaveThroughTunnel(ctx, st)
		var me *MasterError
		switch {
		case errors.As(err, &me) && me.Status == http.StatusUnauthorized && me.Code == api.CodeInvalidNodeToken:
			// The master holds no node with this token: an earlier leave
			// whose answer was lost, or an administrator's disconnect.
			o.Logger.InfoContext(ctx, "the master no longer knows this node", "hostname", o.Hostname)
		case err != nil:
			return err
		}
	}
	if err := o.Tunnel.Down(ctx); err != nil {
		return fmt.Errorf("joinagent: take the tunnel down: %w", err)
	}
	return removeState(o.StateDir)
}

// leaveTunnelWait is how long a leave waits for its answer through the
// tunnel. The master answers once it has removed the node's peer, which
// is the tunnel the answer would travel: when it does not come, the
// leave is asked again at the public URL, where the master answers when
// its release is done (it holds the node while it releases it), 401
// "no such node" once it is.
const leaveTunnelWait = 5 * time.Second

// leaveThroughTunnel asks the master to release the node through the
// tunnel, or, when that does not answer (the tunnel is down, or the
// answer went with the peer), at the public URL.
func (o *Options) leaveThroughTunnel(ctx context.Context, st State) error {
	body := api.HostnameRequest{Hostname: o.Hostname}
	if st.MasterVPNURL != "" {
		tunnel := *o
		tunnel.Master, tunnel.HTTPClient = st.MasterVPNURL, o.tunnelClient()
		tunnelCtx, cancel := context.WithTimeout(ctx, leaveTunnelWait)
		err := tunnel.post(tunnelCtx, "leave", "/v1/nodes/leave", st.NodeToken, body, nil)
		cancel()
		var me *MasterError
		if err == nil || errors.As(err, &me) || ctx.Err() != nil {
			return err
		}
		o.Logger.InfoContext(ctx, "the master does not answer through the tunnel; leaving at its public URL", "error", err)
	}
	return o.post(ctx, "leave", "/v1/nodes/leave", st.NodeToken, body, nil)
}

// tunnelClient is the client for the master's VPN address: plain HTTP
// that must travel through the tunnel. When the tunnel names its device,
// every connection is bound to it, so with the device gone (a reboot) a
// call fails instead of leaving, token and all, by another route; no
// proxy from the environment ever sees it.
func (o *Options) tunnelClient() *http.Client {
	transport := &http.Transport{Proxy: nil, ForceAttemptHTTP2: false, MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if d, ok := o.Tunnel.(interface{ Device() string }); ok && d.Device() != "" {
		device := d.Device()
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var opErr error
			if err := c.Control(func(fd uintptr) { opErr = bindToDevice(int(fd), device) }); err != nil {
				return err
			}
			return opErr
		}
	}
	transport.DialContext = dialer.DialContext
	return &http.Client{Timeout: 30 * time.Second, Transport: transport}
}

// vpnURL checks the URL validate gave for calls through the tunnel: plain
// HTTP to an address inside the VPN, or nothing.
func vpnURL(v api.ValidateResponse) (string, error) {
	if v.MasterVPNURL == "" {
		return "", nil
	}
	u, err := url.Parse(v.MasterVPNURL)
	cidr, cidrErr := netip.ParsePrefix(v.VPNCIDR)
	var ip netip.Addr
	if err == nil {
		ip, err = netip.ParseAddr(u.Hostname())
	}
	if err != nil || cidrErr != nil || u.Scheme != "http" || u.Path != "" && u.Path != "/" || !cidr.Contains(ip) {
		return "", fmt.Errorf("joinagent: the master's validate answer: master_vpn_url %q is not http://<address in %s>:<port>", v.MasterVPNURL, v.VPNCIDR)
	}
	return strings.TrimRight(v.MasterVPNURL, "/"), nil
}

func tunnelConfig(key wgkey.PrivateKey, v api.ValidateResponse) (TunnelConfig, error) {
	ip, err1 := netip.ParseAddr(v.VPNIP)
	cidr, err2 := netip.ParsePrefix(v.VPNCIDR)
	master, err3 := wgkey.Parse(v.MasterPublicKey)
	if err := errors.Join(err1, err2, err3); err != nil {
		return TunnelConfig{}, fmt.Errorf("joinagent: the master's validate answer: %w", err)
	}
	cfg := TunnelConfig{PrivateKey: key, Address: netip.PrefixFrom(ip, cidr.Bits()), MasterPublicKey: master, AllowedIPs: []netip.Prefix{cidr}, Keepalive: 25 * time.Second}
	if v.MasterEndpoint != "" {
		ep, err := netip.ParseAddrPort(v.MasterEndpoint)
		if err != nil {
			return TunnelConfig{}, fmt.Errorf("joinagent: the master's endpoint %q: %w", v.MasterEndpoint, err)
		}
		cfg.MasterEndpoint = ep
	}
	return cfg, nil
}

// post sends body as JSON to the master and decodes a 2xx answer into out.
func (o *Options) post(ctx context.Context, step, path, bearer string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Master+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: reach the master at %s: %w", step, o.Master, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e api.ErrorBody
		_ = json.Unmarshal(data, &e)
		return &MasterError{Step: step, Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: the master's answer is not the expected JSON: %w", step, err)
	}
	return nil
}
