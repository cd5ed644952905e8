package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"gridweave.dev/gridweave/master"
	"gridweave.dev/gridweave/tlspin"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/kubestore"
	"gridweave.dev/mesh/wgkey"
)

func TestMain(m *testing.M) {
	code := testcluster.RunMain(m)
	if serverBinary != "" {
		_ = os.RemoveAll(filepath.Dir(serverBinary))
	}
	os.Exit(code)
}

var (
	serverBinaryOnce sync.Once
	serverBinary     string
	serverBinaryErr  error
)

// buildServer builds this program once per test binary.
func buildServer(t *testing.T) string {
	t.Helper()
	serverBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gridweave-server-bin-")
		if err != nil {
			serverBinaryErr = err
			return
		}
		serverBinary = filepath.Join(dir, "gridweave-server")
		if out, err := exec.Command("go", "build", "-o", serverBinary, ".").CombinedOutput(); err != nil {
			serverBinaryErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if serverBinaryErr != nil {
		t.Fatal(serverBinaryErr)
	}
	return serverBinary
}

// replicaProcess is one server process of an HA test.
type replicaProcess struct {
	name   string
	url    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed when the process has exited
}

// haLedger is a namespace with the ledger's CRDs on the shared control
// plane.
func haLedger(t *testing.T, prefix string) (*testcluster.Cluster, string) {
	t.Helper()
	tc := testcluster.Shared(t)
	ctx := context.Background()
	if err := kubestore.InstallCRDs(ctx, tc.Config); err != nil {
		t.Fatal(err)
	}
	ns := prefix + "-" + randhex.String(3)
	for _, name := range []string{ns, systemNamespace(ns)} {
		if _, err := tc.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Fenced, as deploy/kubernetes/ha/ledger-fence.yaml fences the
	// deployed one: only the Lease's holder writes.
	fence := kubestore.Fence{LedgerNamespace: ns, LeaseNamespace: systemNamespace(ns), LeaseName: master.LeaderLease}
	if err := kubestore.InstallFence(ctx, tc.Config, fence); err != nil {
		t.Fatal(err)
	}
	_, binding := kubestore.FenceObjects(fence)
	t.Cleanup(func() {
		_ = tc.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	awaitFence(t, tc, ns, fence)
	return tc, ns
}

// fenceLoadLimit is how long awaitFence gives the API server: it loads a
// binding within a second or two, even with both cores busy.
const fenceLoadLimit = time.Minute

// awaitFence waits, up to fenceLoadLimit, until the API server enforces
// the fence just installed (it loads a new binding a moment later, more
// under load): with the Lease held by a stand-in, until a write signed by
// another is refused. The Lease goes again before any replica starts.
func awaitFence(t *testing.T, tc *testcluster.Cluster, ns string, fence kubestore.Fence) {
	t.Helper()
	ctx := context.Background()
	holder := "fence-check"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fence.LeaseName, Namespace: fence.LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	if _, err := tc.Kube.CoordinationV1().Leases(fence.LeaseNamespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tc.Kube.CoordinationV1().Leases(fence.LeaseNamespace).Delete(ctx, fence.LeaseName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}()
	store, err := kubestore.New(tc.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(fenceLoadLimit)
	for {
		holds, err := store.FenceHolds(ctx)
		if err == nil && holds {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server does not enforce the fence %s after it was installed (last check: %v)", fenceLoadLimit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// systemNamespace is where the replicas of the ledger in ns keep their own
// objects (GRIDWEAVE_SYSTEM_NAMESPACE): the identity's Secret, the Lease,
// the hub ConfigMap.
func systemNamespace(ns string) string { return ns + "-system" }

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestFailoverKeepsEveryAcknowledgedJoin runs three server processes on
// one ledger in the real API server, each with the same WireGuard device
// name (only the leader makes it), while 16 clients join machines through
// whichever replica answers. The leader is killed with SIGKILL in the
// middle. Afterwards every join acknowledged with 200 is in the ledger
// with the address it was given, no address, hostname or public key is
// held twice, a new replica holds the Lease within the lease duration, and
// its device holds exactly the ledger's peers.
func TestFailoverKeepsEveryAcknowledgedJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane, three server processes and a WireGuard device; run make test")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test makes a wireguard-go device: run it as root (CI does)")
	}
	const lease = 6 * time.Second
	iface := "gwfo" + randhex.String(3)
	h := startHA(t, "failover", 3, lease, iface)
	tc, ns, replicas, client, secret, adminToken, wgPort := h.tc, h.ns, h.replicas, h.client, h.secret, h.adminToken, h.wgPort
	ctx := context.Background()
	holder := h.holder
	first := h.awaitLeader("")
	leader := h.named(first)
	call := h.call
	status, minted, err := call(replicas[0].url, "/v1/nodes/join-keys", map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, adminToken)
	if err != nil || status != 201 {
		t.Fatalf("mint: %d %v %v", status, minted, err)
	}
	key := minted["key"].(string)

	// 16 clients, each joining machines one after the other through the
	// replicas in turn, moving on when one does not answer.
	type outcome struct {
		hostname, publicKey, vpnIP string
		token, hub                 string // the node token and master_endpoint validate answered
		acknowledged               bool
		at                         time.Time
		took                       time.Duration // from the first attempt to the last answer
		refusal                    string        // the last refused attempt's status and code
	}
	const clients, perClient = 16, 20
	var (
		mu       sync.Mutex
		outcomes []outcome
		acked    atomic.Int64
		killedAt atomic.Pointer[time.Time]
	)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for j := range perClient {
				_, pub, err := wgkey.GeneratePair()
				if err != nil {
					t.Error(err)
					return
				}
				host := fmt.Sprintf("c%02d-m%02d", c, j)
				o := outcome{hostname: host, publicKey: pub.String()}
				began := time.Now()
				for attempt := range 6 {
					r := replicas[(c+j+attempt)%len(replicas)]
					status, body, err := call(r.url, "/v1/nodes/validate", map[string]any{"key": key, "hostname": host, "public_key": o.publicKey, "version": "1.4.2"}, "")
					if err != nil {
						continue // that replica is gone: the next one
					}
					if status == 200 {
						o.acknowledged, o.vpnIP, o.at = true, body["vpn_ip"].(string), time.Now()
						o.token, _ = body["node_token"].(string)
						o.hub, _ = body["master_endpoint"].(string)
						break
					}
					if e, ok := body["error"].(map[string]any); ok {
						o.refusal = fmt.Sprintf("%d %v", status, e["code"])
					}
					if status >= 500 || status == 409 && attempt > 0 {
						// A retry after a lost answer finds its own
						// reservation (the hostname and key are taken):
						// an error, never a lost 200.
						continue
					}
					break
				}
				o.took = time.Since(began)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if o.acknowledged && acked.Add(1) == clients*perClient/3 {
					now := time.Now()
					_ = leader.cmd.Process.Signal(syscall.SIGKILL)
					killedAt.Store(&now)
				}
			}
		})
	}
	wg.Wait()
	killed := killedAt.Load()
	if killed == nil {
		t.Fatalf("the leader was never killed: %d joins acknowledged", acked.Load())
	}
	<-leader.exited

	// A new leader holds the Lease within the lease duration (and the
	// retry period a candidate waits between tries).
	next := waitFor(t, 3*lease, "a new leader", func() (string, bool) { l := holder(); return l, l != "" && l != first })
	l, err := tc.Kube.CoordinationV1().Leases(systemNamespace(ns)).Get(ctx, "gridweave-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tookOver := l.Spec.AcquireTime.Sub(*killed)
	t.Logf("leader %s killed; %s took the Lease %.1f s later", first, next, tookOver.Seconds())
	// Candidates try every lease/7, jittered by up to 1.2 times that.
	if bound := lease + 3*(lease/7) + 2*time.Second; tookOver > bound {
		t.Errorf("the new leader took the Lease %.1f s after the kill; want within the lease duration %s and the retries of a candidate (%s)", tookOver.Seconds(), lease, bound)
	}
	// Nodes are told where the leader's device is: validate answered the
	// first leader's endpoint before the kill, and the peer directory
	// moves to the new leader's (nodes point their master peer there).
	endpointOf := func(name string) string {
		var i int
		fmt.Sscanf(name, "replica-%d", &i)
		return fmt.Sprintf("127.0.0.%d:%s", i+1, wgPort)
	}
	var probe outcome
	for _, o := range outcomes {
		if o.acknowledged && o.at.Before(*killed) {
			if o.hub != endpointOf(first) {
				t.Errorf("validate before the kill told %s the hub is at %q, want the leader's %s", o.hostname, o.hub, endpointOf(first))
			}
			probe = o
		}
	}
	waitFor(t, 4*master.FollowEvery+time.Second, "the peer directory to name the new leader's endpoint", func() (bool, bool) {
		for _, r := range replicas {
			if r == leader {
				continue
			}
			req, _ := http.NewRequest("GET", r.url+"/v1/nodes/peers?hostname="+probe.hostname, nil)
			req.Header.Set("Authorization", "Bearer "+probe.token)
			resp, err := client.Do(req)
			if err != nil {
				return false, false
			}
			var dir struct {
				MasterEndpoint string `json:"master_endpoint"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&dir)
			resp.Body.Close()
			if dir.MasterEndpoint != endpointOf(next) {
				return false, false
			}
		}
		return true, true
	})

	var firstAfter time.Time
	failedAfter := 0
	refusals := map[string]int{}
	for _, o := range outcomes {
		if o.acknowledged && o.at.After(*killed) && (firstAfter.IsZero() || o.at.Before(firstAfter)) {
			firstAfter = o.at
		}
		if !o.acknowledged {
			failedAfter++
			refusals[o.refusal]++
		}
	}
	if firstAfter.IsZero() {
		t.Fatal("no join was acknowledged after the kill")
	}
	took := make([]time.Duration, 0, len(outcomes))
	for _, o := range outcomes {
		took = append(took, o.took)
	}
	slices.Sort(took)
	t.Logf("%d joins acknowledged, %d refused (the last refusals: %v); the first after the kill %.2f s after it; a join took %.2f s at p50, %.2f s at p99, %.2f s at most (writes wait for the new leader)",
		acked.Load(), failedAfter, refusals, firstAfter.Sub(*killed).Seconds(), took[len(took)/2].Seconds(), took[len(took)*99/100].Seconds(), took[len(took)-1].Seconds())

	// The ledger holds every acknowledged join, at the address it was
	// given, and nothing twice.
	nodes, byHost := ledgerNodes(t, tc, ns)
	for _, o := range outcomes {
		n, ok := byHost[o.hostname]
		switch {
		case o.acknowledged && !ok:
			t.Errorf("%s was acknowledged with %s but is not in the ledger", o.hostname, o.vpnIP)
		case o.acknowledged && (n.VPNIP.String() != o.vpnIP || n.PublicKey.String() != o.publicKey):
			t.Errorf("%s was acknowledged with %s, the ledger holds %s", o.hostname, o.vpnIP, n.VPNIP)
		case !o.acknowledged && ok && n.PublicKey.String() != o.publicKey:
			t.Errorf("%s was refused but the ledger holds it under another key", o.hostname)
		}
	}

	onlyLeadersWrote(t, tc, ns, first, next)

	// The new leader's device holds exactly the ledger's peers.
	wg2, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer wg2.Close()
	want := map[string]string{}
	for _, n := range nodes {
		want[n.PublicKey.String()] = netip.PrefixFrom(n.VPNIP, 32).String()
	}
	waitFor(t, 20*time.Second, "the new leader's device to hold the ledger's peers", func() (bool, bool) {
		dev, err := wg2.Device(iface)
		if err != nil {
			return false, false
		}
		got := map[string]string{}
		for _, p := range dev.Peers {
			var ips []string
			for _, ip := range p.AllowedIPs {
				ips = append(ips, ip.String())
			}
			slices.Sort(ips)
			got[p.PublicKey.String()] = fmt.Sprint(ips)
		}
		if len(got) != len(want) {
			return false, false
		}
		for k, ip := range want {
			if got[k] != fmt.Sprint([]string{ip}) {
				return false, false
			}
		}
		return true, true
	})
	private, err := wgkey.ParsePrivate(string(bytes.TrimSpace(secret.Data["wireguard.key"])))
	if err != nil {
		t.Fatal(err)
	}
	shared, _ := private.Public()
	if dev, err := wg2.Device(iface); err != nil || dev.PublicKey.String() != shared.String() {
		t.Errorf("the new leader's device: %v; want the shared key %s", err, shared)
	}
}

// TestADeposedLeaderCannotWrite stops the leader with SIGSTOP past its
// lease, lets the other replica take over and acknowledge joins, then
// resumes the old leader with joins in flight on it, sent while it was
// stopped. Whatever the old leader does with them (its writes refused by
// the fence, or handed to the new leader once it noticed), no address,
// hostname or public key is held twice, every acknowledged join is in
// the ledger at the address it was given, and only Lease holders wrote
// the ledger.
func TestADeposedLeaderCannotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane and two server processes; run make test")
	}
	const lease = 4 * time.Second
	h := startHA(t, "fenced", 2, lease, "")
	first := h.awaitLeader("")
	old := h.named(first)
	other := h.replicas[0]
	if other == old {
		other = h.replicas[1]
	}
	status, minted, err := h.call(other.url, "/v1/nodes/join-keys", map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, h.adminToken)
	if err != nil || status != 201 {
		t.Fatalf("mint: %d %v %v", status, minted, err)
	}
	key := minted["key"].(string)

	type join struct {
		hostname, publicKey, vpnIP string
		status                     int
		code                       string
	}
	validate := func(client *http.Client, url, hostname string) join {
		_, pub, err := wgkey.GeneratePair()
		if err != nil {
			t.Error(err)
			return join{hostname: hostname}
		}
		j := join{hostname: hostname, publicKey: pub.String()}
		status, body, err := postJSON(client, url+"/v1/nodes/validate", map[string]any{"key": key, "hostname": hostname, "public_key": j.publicKey, "version": "1.4.2"}, "")
		if err != nil {
			j.code = err.Error()
			return j
		}
		j.status = status
		if status == 200 {
			j.vpnIP, _ = body["vpn_ip"].(string)
		} else if e, ok := body["error"].(map[string]any); ok {
			j.code = fmt.Sprintf("%v (%.60v)", e["code"], e["message"])
		}
		return j
	}
	var joins []join
	for i := range 4 {
		for _, r := range h.replicas {
			joins = append(joins, validate(h.client, r.url, fmt.Sprintf("before-%s-%d", r.name, i)))
		}
	}

	// The leader stops; joins sent to it wait in its sockets.
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	patient := &http.Client{Timeout: 2 * time.Minute, Transport: h.client.Transport}
	inFlight := make(chan join, 8)
	for i := range cap(inFlight) {
		go func() { inFlight <- validate(patient, old.url, fmt.Sprintf("in-flight-%d", i)) }()
	}
	next := h.awaitLeader(first)
	for i := range 8 {
		joins = append(joins, validate(h.client, h.named(next).url, fmt.Sprintf("after-%d", i)))
	}
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	answers := map[string]int{}
	for range cap(inFlight) {
		select {
		case j := <-inFlight:
			joins = append(joins, j)
			answers[fmt.Sprintf("%d %s", j.status, j.code)]++
		case <-time.After(90 * time.Second):
			t.Fatal("the joins sent to the stopped leader were never answered")
		}
	}
	t.Logf("%s took the Lease from %s; the joins in flight on %s were answered: %v", next, first, first, answers)

	_, byHost := ledgerNodes(t, h.tc, h.ns)
	acknowledged := 0
	for _, j := range joins {
		if j.status != 200 {
			continue
		}
		acknowledged++
		if n, ok := byHost[j.hostname]; !ok || n.VPNIP.String() != j.vpnIP || n.PublicKey.String() != j.publicKey {
			t.Errorf("%s was acknowledged with %s; the ledger holds %+v (%v)", j.hostname, j.vpnIP, n.Node, ok)
		}
	}
	if acknowledged < 16 {
		t.Errorf("%d joins acknowledged; want at least those sent to a live leader (16)", acknowledged)
	}
	onlyLeadersWrote(t, h.tc, h.ns, first, next)
}

// TestEveryReplicaAnswersTheLeadersLinks: an agent's link report taken
// by a replica that does not lead lands in the leader's book, and every
// replica answers it alike: the node's links, its counts in the node
// list, its reported endpoints in another node's peer directory, and that
// whole directory.
func TestEveryReplicaAnswersTheLeadersLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane and two server processes; run make test")
	}
	h := startHA(t, "links", 2, 4*time.Second, "")
	leader := h.named(h.awaitLeader(""))
	follower := h.replicas[0]
	if follower == leader {
		follower = h.replicas[1]
	}
	status, minted, err := h.call(follower.url, "/v1/nodes/join-keys", map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, h.adminToken)
	if err != nil || status != 201 {
		t.Fatalf("mint: %d %v %v", status, minted, err)
	}
	tokens, keys := map[string]string{}, map[string]string{}
	for _, host := range []string{"gpu-a", "gpu-b"} {
		_, pub, err := wgkey.GeneratePair()
		if err != nil {
			t.Fatal(err)
		}
		status, body, err := h.call(follower.url, "/v1/nodes/validate", map[string]any{"key": minted["key"], "hostname": host, "public_key": pub.String(), "version": "1.4.2"}, "")
		if err != nil || status != 200 {
			t.Fatalf("validate %s: %d %v %v", host, status, body, err)
		}
		tokens[host], keys[host] = body["node_token"].(string), pub.String()
	}
	status, body, err := h.call(follower.url, "/v1/nodes/links", map[string]any{"hostname": "gpu-a", "listen_port": 51820, "endpoints": []string{"203.0.113.10:51820"},
		"links": []map[string]any{{"hostname": "gpu-b", "public_key": keys["gpu-b"], "state": "direct", "endpoint": "203.0.113.11:51820"}}}, tokens["gpu-a"])
	if err != nil || status != 200 {
		t.Fatalf("the report through %s: %d %v %v", follower.name, status, body, err)
	}
	get := func(url, path, token string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s %v", path, resp.Status, err)
		}
		return out
	}
	for _, r := range []*replicaProcess{leader, follower} {
		links := get(r.url, "/v1/nodes/gpu-a/links", h.adminToken)
		if counts, _ := links["counts"].(map[string]any); counts["direct"] != 1.0 || len(links["links"].([]any)) != 1 || links["reported_at"] == nil {
			t.Errorf("%s answers gpu-a's links %v; want the report, one direct link", r.name, links)
		}
		waitFor(t, 10*time.Second, r.name+"'s node list to count gpu-a's link", func() (bool, bool) {
			for _, n := range get(r.url, "/v1/nodes", h.adminToken)["nodes"].([]any) {
				node := n.(map[string]any)
				if c, ok := node["links"].(map[string]any); node["hostname"] == "gpu-a" && ok && c["direct"] == 1.0 {
					return true, true
				}
			}
			return false, false
		})
		waitFor(t, 10*time.Second, r.name+"'s peer directory to carry gpu-a's reported endpoint", func() (bool, bool) {
			dir := get(r.url, "/v1/nodes/peers?hostname=gpu-b", tokens["gpu-b"])
			for _, p := range dir["peers"].([]any) {
				peer := p.(map[string]any)
				if peer["hostname"] == "gpu-a" && slices.Contains(peer["endpoints"].([]any), any("203.0.113.10:51820")) {
					return true, true
				}
			}
			return false, false
		})
	}
	// The whole directory is the same from both: its revision hashes
	// every peer's endpoints, the leader's device's observations among
	// them.
	waitFor(t, 10*time.Second, "the same peer directory from both replicas", func() (bool, bool) {
		a := get(leader.url, "/v1/nodes/peers?hostname=gpu-b", tokens["gpu-b"])["revision"]
		b := get(follower.url, "/v1/nodes/peers?hostname=gpu-b", tokens["gpu-b"])["revision"]
		same := a == b && a != nil
		return same, same
	})
}

// ledgerNodes reads the ledger in ns and fails t for an address or a
// public key held twice; it returns the nodes and them by hostname.
func ledgerNodes(t *testing.T, tc *testcluster.Cluster, ns string) ([]joinkeys.NodeRecord, map[string]joinkeys.NodeRecord) {
	t.Helper()
	store, err := kubestore.New(tc.Config, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := store.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string]joinkeys.NodeRecord{}
	addrs, keys := map[netip.Addr]string{}, map[wgkey.Key]string{}
	for _, n := range nodes {
		if other, dup := addrs[n.VPNIP]; dup {
			t.Errorf("%s is held by %s and %s", n.VPNIP, other, n.Hostname)
		}
		if other, dup := keys[n.PublicKey]; dup {
			t.Errorf("a public key is held by %s and %s", other, n.Hostname)
		}
		addrs[n.VPNIP], keys[n.PublicKey], byHost[n.Hostname] = n.Hostname, n.Hostname, n
	}
	return nodes, byHost
}

// onlyLeadersWrote fails t for a LedgerNode or JoinKey in ns that a
// replica other than leaders wrote or signed: the API server names each
// object's writers (managedFields) by their user agents,
// gridweave-ledger-<replica>, and each carries its last writer's
// signature (kubestore.WriterAnnotation).
func onlyLeadersWrote(t *testing.T, tc *testcluster.Cluster, ns string, leaders ...string) {
	t.Helper()
	for _, resource := range []string{"ledgernodes", "joinkeys"} {
		list, err := tc.Dynamic.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: resource}).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			for _, m := range o.GetManagedFields() {
				if name, ok := strings.CutPrefix(m.Manager, "gridweave-ledger-"); !ok || !slices.Contains(leaders, name) {
					t.Errorf("%s %s was written by %s, which never led (leaders: %v)", resource, o.GetName(), m.Manager, leaders)
				}
			}
			if w := o.GetAnnotations()[kubestore.WriterAnnotation]; !slices.Contains(leaders, w) {
				t.Errorf("%s %s is signed by %q, not a leader (%v)", resource, o.GetName(), w, leaders)
			}
		}
	}
}

// haReplicas are server processes on one fenced ledger in the shared
// control plane, every one ready.
type haReplicas struct {
	t          *testing.T
	tc         *testcluster.Cluster
	ns         string
	replicas   []*replicaProcess
	client     *http.Client // pinned to the shared certificate
	secret     *corev1.Secret
	adminToken string
	wgPort     string
}

// TestTheChannelStaysTLSWithTLSOff: replicas whose public listener is
// plain HTTP (TLS=off, behind a TLS-terminating proxy) still hand the
// ledger's writes to the leader over TLS: the leader publishes an https
// channel, and a key minted through another replica (a write the leader
// makes) is answered.
func TestTheChannelStaysTLSWithTLSOff(t *testing.T) {
	if testing.Short() {
		t.Skip("real control plane and two server processes; run make test")
	}
	h := startHA(t, "plain", 2, 4*time.Second, "", "TLS=off")
	leader := h.named(h.awaitLeader(""))
	follower := h.replicas[0]
	if follower == leader {
		follower = h.replicas[1]
	}
	cm, err := h.tc.Kube.CoreV1().ConfigMaps(systemNamespace(h.ns)).Get(context.Background(), master.HubConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if channel := cm.Data["replica"]; !strings.HasPrefix(channel, "https://") {
		t.Errorf("the leader publishes its channel as %q; want https", channel)
	}
	status, minted, err := h.call(follower.url, "/v1/nodes/join-keys", map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, h.adminToken)
	if err != nil || status != 201 {
		t.Fatalf("a key minted through %s (the leader is %s): %d %v %v", follower.name, leader.name, status, minted, err)
	}
}

// startHA starts n replicas on a new ledger with the given lease. iface
// names the WireGuard device only the leader makes ("" for none: peers in
// memory).
func startHA(t *testing.T, prefix string, n int, lease time.Duration, iface string, env ...string) *haReplicas {
	t.Helper()
	scheme := "https"
	if slices.Contains(env, "TLS=off") {
		scheme = "http"
	}
	tc, ns := haLedger(t, prefix)
	bin := buildServer(t)
	ctx := context.Background()
	h := &haReplicas{t: t, tc: tc, ns: ns, adminToken: randhex.String(16), wgPort: strconv.Itoa(freeUDPPort(t))}
	device := "none"
	if iface != "" {
		device = iface
		// Registered first, so it runs after every replica stopped: a
		// kernel WireGuard link outlives a SIGKILLed leader.
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", iface).Run() })
	}
	for i := range n {
		addr := freeAddr(t)
		dir := t.TempDir()
		r := &replicaProcess{name: fmt.Sprintf("replica-%d", i), url: scheme + "://" + addr, stderr: &syncBuffer{}, exited: make(chan struct{})}
		r.cmd = exec.Command(bin, "--addr", addr)
		r.cmd.Env = append(os.Environ(),
			"KUBECONFIG="+tc.KubeconfigPath, "KUBERAY_STORE=kubernetes", "KUBERAY_NAMESPACE="+ns, "GRIDWEAVE_SYSTEM_NAMESPACE="+systemNamespace(ns),
			"KUBERAY_DB="+filepath.Join(dir, "kuberay.db"), "POD_NAME="+r.name, "ADMIN_TOKEN="+h.adminToken, "REPLICA_ADDR="+freeAddr(t),
			"WG_INTERFACE="+device, "WG_PORT="+h.wgPort, "MASTER_IP=127.0.0.1", fmt.Sprintf("HUB_IP=127.0.0.%d", i+1),
			"MASTER_VPN_IP=198.18.240.1", "VPN_CIDR=198.18.240.0/20",
			"VPN_HTTP_PORT="+strconv.Itoa(20000+i), "LEADER_LEASE_DURATION="+lease.String(),
			"RATE_LIMIT_PER_MINUTE=1000000", "SERVER_VERSION=1.4.0", testcluster.OwnerEnv+"="+tc.ID)
		r.cmd.Env = append(r.cmd.Env, env...)
		r.cmd.Stdout, r.cmd.Stderr = io.Discard, r.stderr
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.cmd.Wait(); close(r.exited) }()
		t.Cleanup(func() {
			_ = r.cmd.Process.Signal(syscall.SIGCONT) // in case a test left it stopped
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(15 * time.Second):
				_ = r.cmd.Process.Kill()
				<-r.exited
			}
			if t.Failed() {
				t.Logf("%s's log (tail):\n%s", r.name, tail(r.stderr.String(), 4000))
			}
		})
		h.replicas = append(h.replicas, r)
	}

	// Every replica serves the same certificate, from the shared Secret:
	// one pin reaches them all, as a join command's does.
	h.secret = waitFor(t, 60*time.Second, "the shared Secret", func() (*corev1.Secret, bool) {
		s, err := tc.Kube.CoreV1().Secrets(systemNamespace(ns)).Get(ctx, "gridweave-master", metav1.GetOptions{})
		return s, err == nil
	})
	if scheme == "http" {
		h.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
		h.awaitHealthy()
		return h
	}
	pinDir := t.TempDir()
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(pinDir, name), h.secret.Data[name], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kp, err := tlspin.Load(filepath.Join(pinDir, "tls.crt"), filepath.Join(pinDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	h.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlspin.ClientConfig(kp.Pin), MaxIdleConnsPerHost: 32}}
	h.awaitHealthy()
	return h
}

// awaitHealthy waits for every replica's /healthz to answer 200.
func (h *haReplicas) awaitHealthy() {
	h.t.Helper()
	for _, r := range h.replicas {
		waitFor(h.t, 60*time.Second, r.name+" /healthz", func() (bool, bool) {
			resp, err := h.client.Get(r.url + "/healthz")
			if err != nil {
				return false, false
			}
			resp.Body.Close()
			return true, resp.StatusCode == 200
		})
	}
}

// holder is the replica the Lease names ("" for none).
func (h *haReplicas) holder() string {
	l, err := h.tc.Kube.CoordinationV1().Leases(systemNamespace(h.ns)).Get(context.Background(), master.LeaderLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// awaitLeader waits for a replica other than not to hold the Lease and
// publish itself in the hub ConfigMap (it takes writes from then on), and
// returns its name.
func (h *haReplicas) awaitLeader(not string) string {
	h.t.Helper()
	name := waitFor(h.t, 60*time.Second, "a leader", func() (string, bool) { l := h.holder(); return l, l != "" && l != not })
	if h.named(name) == nil {
		h.t.Fatalf("the Lease names %q, not a replica", name)
	}
	waitFor(h.t, 30*time.Second, name+" to publish itself", func() (bool, bool) {
		cm, err := h.tc.Kube.CoreV1().ConfigMaps(systemNamespace(h.ns)).Get(context.Background(), master.HubConfigMap, metav1.GetOptions{})
		return true, err == nil && cm.Data["leader"] == name
	})
	return name
}

func (h *haReplicas) named(name string) *replicaProcess {
	for _, r := range h.replicas {
		if r.name == name {
			return r
		}
	}
	return nil
}

// call POSTs body as JSON to url+path with token as the bearer.
func (h *haReplicas) call(url, path string, body any, token string) (int, map[string]any, error) {
	return postJSON(h.client, url+path, body, token)
}

func postJSON(client *http.Client, url string, body any, token string) (int, map[string]any, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// waitFor polls check every 100 ms until it reports done, or fails the
// test after timeout naming what it waited for.
func waitFor[T any](t *testing.T, timeout time.Duration, what string, check func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, ok := check()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
