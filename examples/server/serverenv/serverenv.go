package serverenv

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave"
)

// Variables maps each setting (a gridweave.Config field's name) the
// environment sets to its variable.
var Variables = map[string]string{
	"Port": "KUBERAY_PORT", "DBPath": "KUBERAY_DB", "DBSync": "KUBERAY_DB_SYNC", "Store": "KUBERAY_STORE",
	"HubIP": "HUB_IP", "ReplicaAddr": "REPLICA_ADDR", "LeaseDuration": "LEADER_LEASE_DURATION", "Namespace": "KUBERAY_NAMESPACE",
	"SystemNamespace": "GRIDWEAVE_SYSTEM_NAMESPACE", "AdminToken": "ADMIN_TOKEN", "JWTSecret": "JWT_SECRET",
	"ServerVersion": "SERVER_VERSION", "RayImage": "RAY_IMAGE", "RayImageWorker": "RAY_IMAGE_WORKER",
	"ClusterName": "CLUSTER_NAME", "MasterIP": "MASTER_IP", "MasterVPNIP": "MASTER_VPN_IP", "VPNCIDR": "VPN_CIDR",
	"ServiceCIDR": "SERVICE_CIDR", "ClusterCIDR": "CLUSTER_CIDR", "NodeCIDRMaskBits": "NODE_CIDR_MASK",
	"WireGuardInterface": "WG_INTERFACE", "WireGuardPort": "WG_PORT", "ReflexivePort": "STUN_PORT", "RayDashboardURL": "RAY_DASHBOARD_URL",
	"KubeTorchDir": "KUBETORCH_DIR", "KubeTorchMaxBundle": "KUBETORCH_MAX_BUNDLE_BYTES", "KubeTorchBaseURL": "KUBETORCH_BASE_URL",
	"KubeTorchMaxExpanded": "KUBETORCH_MAX_EXPANDED_BYTES", "KubeTorchMaxEntries": "KUBETORCH_MAX_ENTRIES",
	"KubeTorchMaxRatio": "KUBETORCH_MAX_RATIO", "RayDashboardTimeout": "RAY_DASHBOARD_TIMEOUT", "CORSOrigins": "CORS_ORIGINS",
	"RateLimitPerMinute": "RATE_LIMIT_PER_MINUTE", "K3sURL": "K3S_URL", "K3sAgentToken": "K3S_AGENT_TOKEN_FILE",
	"K3sAgentTokenFile": "K3S_AGENT_TOKEN_FILE", "KubeJoinMode": "KUBE_JOIN_MODE", "KubeletAPIServer": "KUBELET_API_SERVER",
	"KubeletCAFile": "KUBELET_CA_FILE", "KubeletCAPEM": "KUBELET_CA_FILE", "KubeletTLSServerName": "KUBELET_TLS_SERVER_NAME",
	"KubeletBinary": "KUBELET_BINARY", "KubeletTokenTTL": "KUBELET_TOKEN_TTL", "KubeletDrainTimeout": "KUBELET_DRAIN_TIMEOUT",
	"KubeletClusterDNS": "CLUSTER_DNS", "ClusterDomain": "CLUSTER_DOMAIN", "InternalAddr": "INTERNAL_ADDR",
	"InternalToken": "INTERNAL_TOKEN", "DCGMTargetsDir": "DCGM_TARGETS_DIR", "K3sBinary": "K3S_BINARY",
	"WorkerImageTar": "WORKER_IMAGE_TAR", "TLS": "TLS", "TLSCertFile": "TLS_CERT_FILE", "TLSKeyFile": "TLS_KEY_FILE",
	"VPNHTTPPort": "VPN_HTTP_PORT", "AgentDir": "AGENT_DIR", "MaxBodyBytes": "MAX_BODY_BYTES",
	"ShutdownTimeout": "SHUTDOWN_TIMEOUT", "ValidatedTTL": "VALIDATED_TTL", "AddressQuarantine": "ADDRESS_QUARANTINE",
	"ConsolePublic": "CONSOLE_PUBLIC", "SharedOrgs": "SHARED_ORGS", "FleetLAN": "FLEET_LAN", "Dev": "GRIDWEAVE_DEV=1 or --dev",
}

// Name is the variable that sets a setting, for gridweave.Config's
// SettingName; a setting no variable sets keeps the library's name.
func Name(field string) string { return Variables[field] }

// An Error names the variable whose value is wrong.
type Error struct {
	Variable string
	Problem  string
}

func (e *Error) Error() string { return e.Variable + ": " + e.Problem }

// Explain turns a refusal of one setting (a *gridweave.SettingError in
// err's chain) into an *Error naming its variable; any other error is
// returned as it is.
func Explain(err error) error {
	var setting *gridweave.SettingError
	if errors.As(err, &setting) {
		if name := Variables[setting.Setting]; name != "" && !strings.Contains(name, " ") {
			return &Error{Variable: name, Problem: setting.Err.Error()}
		}
	}
	return err
}

// Read is the configuration the environment sets through getenv
// (os.Getenv in the program, a map in tests), every variable it leaves
// unset at its default, judged by Validate. A malformed or refused value
// is an *Error naming the variable. Safety (secrets) is gridweave.Config's
// Check, which the program calls when it starts.
func Read(getenv func(string) string) (gridweave.Config, error) {
	r := reader{getenv: getenv}
	c := gridweave.DefaultConfig()
	c.SettingName = Name
	if head := r.get("RAY_HEAD_ADDRESS"); head != "" {
		return gridweave.Config{}, &Error{"RAY_HEAD_ADDRESS", fmt.Sprintf("%q is not used: the server reaches Ray only through the head's dashboard (Serve statuses, jobs), never through the Ray client; "+
			"unset RAY_HEAD_ADDRESS and, if the default (http://MASTER_VPN_IP:8265) is not the head's, set RAY_DASHBOARD_URL=%s", head, dashboardURLFor(head))}
	}
	r.text(&c.DBPath, "KUBERAY_DB")
	r.text(&c.DBSync, "KUBERAY_DB_SYNC")
	r.lower(&c.Store, "KUBERAY_STORE")
	r.text(&c.Namespace, "KUBERAY_NAMESPACE")
	r.text(&c.SystemNamespace, "GRIDWEAVE_SYSTEM_NAMESPACE")
	r.text(&c.AdminToken, "ADMIN_TOKEN")
	r.text(&c.JWTSecret, "JWT_SECRET")
	r.text(&c.ServerVersion, "SERVER_VERSION")
	r.text(&c.RayImage, "RAY_IMAGE")
	r.text(&c.RayImageWorker, "RAY_IMAGE_WORKER")
	r.text(&c.ClusterName, "CLUSTER_NAME")
	r.text(&c.MasterIP, "MASTER_IP")
	r.text(&c.HubIP, "HUB_IP")
	r.text(&c.ReplicaAddr, "REPLICA_ADDR")
	r.text(&c.WireGuardInterface, "WG_INTERFACE")
	r.text(&c.RayDashboardURL, "RAY_DASHBOARD_URL")
	r.text(&c.K3sURL, "K3S_URL")
	r.text(&c.K3sAgentTokenFile, "K3S_AGENT_TOKEN_FILE")
	r.text(&c.InternalAddr, "INTERNAL_ADDR")
	r.text(&c.AgentDir, "AGENT_DIR")
	r.text(&c.WorkerImageTar, "WORKER_IMAGE_TAR")
	r.text(&c.K3sBinary, "K3S_BINARY")
	r.lower(&c.KubeJoinMode, "KUBE_JOIN_MODE")
	r.text(&c.KubeletCAFile, "KUBELET_CA_FILE")
	r.text(&c.KubeletTLSServerName, "KUBELET_TLS_SERVER_NAME")
	r.text(&c.KubeletBinary, "KUBELET_BINARY")
	r.text(&c.DCGMTargetsDir, "DCGM_TARGETS_DIR")
	r.lower(&c.TLS, "TLS")
	r.text(&c.TLSCertFile, "TLS_CERT_FILE")
	r.text(&c.TLSKeyFile, "TLS_KEY_FILE")
	c.InternalToken = getenv("INTERNAL_TOKEN")
	c.Dev = r.get("GRIDWEAVE_DEV") == "1" || r.get("GRIDWEAVE_DEV") == "true"
	r.integer(&c.Port, "KUBERAY_PORT")
	r.integer(&c.WireGuardPort, "WG_PORT")
	r.integer(&c.ReflexivePort, "STUN_PORT")
	r.integer(&c.VPNHTTPPort, "VPN_HTTP_PORT")
	r.integer(&c.RateLimitPerMinute, "RATE_LIMIT_PER_MINUTE")
	r.bytes(&c.MaxBodyBytes, "MAX_BODY_BYTES")
	r.address(&c.MasterVPNIP, "MASTER_VPN_IP")
	r.prefix(&c.VPNCIDR, "VPN_CIDR", "10.100.0.0/16")
	r.prefix(&c.ServiceCIDR, "SERVICE_CIDR", "10.43.0.0/16 (k3s's --service-cidr)")
	r.prefix(&c.ClusterCIDR, "CLUSTER_CIDR", "10.42.0.0/16 (k3s's --cluster-cidr)")
	c.NodeCIDRMaskBits = max(c.NodeCIDRMaskBits, c.ClusterCIDR.Bits())
	r.integer(&c.NodeCIDRMaskBits, "NODE_CIDR_MASK")
	r.duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", "10s")
	r.text(&c.KubeTorchDir, "KUBETORCH_DIR")
	r.bytes(&c.KubeTorchMaxBundle, "KUBETORCH_MAX_BUNDLE_BYTES")
	c.KubeTorchBaseURL = strings.TrimRight(r.get("KUBETORCH_BASE_URL"), "/")
	r.bytes(&c.KubeTorchMaxExpanded, "KUBETORCH_MAX_EXPANDED_BYTES")
	r.integer(&c.KubeTorchMaxEntries, "KUBETORCH_MAX_ENTRIES")
	r.integer(&c.KubeTorchMaxRatio, "KUBETORCH_MAX_RATIO")
	r.duration(&c.RayDashboardTimeout, "RAY_DASHBOARD_TIMEOUT", "15s")
	r.duration(&c.ValidatedTTL, "VALIDATED_TTL", "10m")
	r.duration(&c.AddressQuarantine, "ADDRESS_QUARANTINE", "1h (0s for none)")
	r.list(&c.SharedOrgs, "SHARED_ORGS")
	r.onOff(&c.ConsolePublic, "CONSOLE_PUBLIC")
	r.onOff(&c.FleetLAN, "FLEET_LAN")
	r.list(&c.CORSOrigins, "CORS_ORIGINS")
	r.text(&c.KubeletAPIServer, "KUBELET_API_SERVER")
	r.duration(&c.KubeletTokenTTL, "KUBELET_TOKEN_TTL", "30m")
	r.duration(&c.KubeletDrainTimeout, "KUBELET_DRAIN_TIMEOUT", "20s")
	if raw := r.get("CLUSTER_DNS"); raw != "" && r.err == nil {
		for _, field := range strings.Split(raw, ",") {
			addr, err := netip.ParseAddr(strings.TrimSpace(field))
			if err != nil {
				r.fail("CLUSTER_DNS", "%q is not an IP address (a comma-separated list of them)", strings.TrimSpace(field))
				break
			}
			c.KubeletClusterDNS = append(c.KubeletClusterDNS, addr)
		}
	}
	if r.get("CLUSTER_DOMAIN") != "" && c.KubeJoinMode != gridweave.JoinModeKubelet {
		r.fail("CLUSTER_DOMAIN", "set with KUBE_JOIN_MODE=k3s: k3s's agents take the cluster domain from the k3s server; unset CLUSTER_DOMAIN")
	}
	r.text(&c.ClusterDomain, "CLUSTER_DOMAIN")
	c.ClusterDomain = strings.TrimSuffix(c.ClusterDomain, ".")
	r.duration(&c.LeaseDuration, "LEADER_LEASE_DURATION", "15s")
	if r.err != nil {
		return gridweave.Config{}, r.err
	}
	if err := c.Validate(); err != nil {
		return gridweave.Config{}, Explain(err)
	}
	return c, nil
}

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

// reader reads variables into settings, keeping the first malformed
// value's error (later reads do nothing).
type reader struct {
	getenv func(string) string
	err    error
}

func (r *reader) get(name string) string { return strings.TrimSpace(r.getenv(name)) }

func (r *reader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = &Error{Variable: name, Problem: fmt.Sprintf(format, args...)}
	}
}

// set reads name, when set and no error came before, into v with parse;
// a value parse refuses is an error saying it is not problem.
func set[T any](r *reader, v *T, name string, parse func(raw string) (T, bool), problem string) {
	raw := r.get(name)
	if raw == "" || r.err != nil {
		return
	}
	value, ok := parse(raw)
	if !ok {
		r.fail(name, "%q is not %s", raw, problem)
		return
	}
	*v = value
}

func (r *reader) text(v *string, name string) {
	set(r, v, name, func(raw string) (string, bool) { return raw, true }, "")
}

func (r *reader) lower(v *string, name string) {
	set(r, v, name, func(raw string) (string, bool) { return strings.ToLower(raw), true }, "")
}

func (r *reader) integer(v *int, name string) {
	set(r, v, name, func(raw string) (int, bool) { n, err := strconv.Atoi(raw); return n, err == nil }, "a whole number")
}

func (r *reader) bytes(v *int64, name string) {
	set(r, v, name, func(raw string) (int64, bool) { n, err := strconv.ParseInt(raw, 10, 64); return n, err == nil }, "a whole number of bytes")
}

func (r *reader) duration(v *time.Duration, name, example string) {
	set(r, v, name, func(raw string) (time.Duration, bool) { d, err := time.ParseDuration(raw); return d, err == nil }, "a duration such as "+example)
}

func (r *reader) address(v *netip.Addr, name string) {
	set(r, v, name, func(raw string) (netip.Addr, bool) { a, err := netip.ParseAddr(raw); return a, err == nil && a.Is4() }, "an IPv4 address")
}

func (r *reader) prefix(v *netip.Prefix, name, example string) {
	set(r, v, name, func(raw string) (netip.Prefix, bool) { p, err := netip.ParsePrefix(raw); return p, err == nil }, "a CIDR such as "+example)
}

func (r *reader) onOff(v *bool, name string) {
	set(r, v, name, func(raw string) (bool, bool) {
		switch strings.ToLower(raw) {
		case "on":
			return true, true
		case "off":
			return false, true
		}
		return false, false
	}, "on or off")
}

func (r *reader) list(v *[]string, name string) {
	set(r, v, name, func(raw string) ([]string, bool) {
		var list []string
		for _, o := range strings.Split(raw, ",") {
			if o = strings.TrimSpace(o); o != "" {
				list = append(list, o)
			}
		}
		return list, true
	}, "")
}
