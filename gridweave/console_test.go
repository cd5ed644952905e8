package gridweave_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/golang-jwt/jwt/v5"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/browsertest"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/rayctl/rayctltest"
)

// consoleArtifacts is where TestConsoleInBrowser keeps its screenshots
// (testdata/artifacts is ignored by git).
const consoleArtifacts = "testdata/artifacts"

// movableClock is the server's clock: the real time plus what the test
// moved it by.
type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *movableClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// consoleFixture is a server whose mesh is a real wireguard-go device, a
// machine whose tunnel to it is another, and a browser.
type consoleFixture struct {
	t       *testing.T
	url     string
	joinURL string // the master before its upgrade
	server  *gridweave.Server
	clock   *movableClock
	fakes   *rayctltest.Fakes
	nodeNS  *netnstest.Namespace
	nodeDev *wgdevice.Device
	browser *browsertest.Browser
	ctx     context.Context
}

func newConsoleFixture(t *testing.T) *consoleFixture {
	t.Helper()
	netnstest.RequireRoot(t)
	f := &consoleFixture{t: t, clock: &movableClock{}}
	config := func(version string) gridweave.Config {
		cfg := gridweave.DefaultConfig()
		cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion, cfg.Namespace = testAdminToken, testSecret, version, testNamespace
		cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = "198.18.230.1", netip.MustParsePrefix("198.19.230.0/24"), netip.MustParseAddr("198.19.230.1")
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := config("1.9.0")

	// The master's device and the machine's, each in a namespace of its
	// own, linked.
	masterNS := netnstest.New(t, "gwcm")
	f.nodeNS = netnstest.New(t, "gwcn")
	netnstest.Link(t, masterNS, "198.18.230.1/30", f.nodeNS, "198.18.230.2/30")
	masterDev := wgdevice.Start(t, masterNS, "gwcm", 51820)
	masterDev.Up(t, masterNS, "198.19.230.1/24")
	f.nodeDev = wgdevice.Start(t, f.nodeNS, "gwcn", 0)
	m, err := wgmesh.New(context.Background(), masterDev.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })

	store := new(memstore.Store)
	t.Cleanup(func() { store.Close() })
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.fakes = rayctltest.New(t, cfg.Namespace)
	scheme := k8sruntime.NewScheme()
	jobs := v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{jobs: "GridweaveJobList"})
	for _, j := range []struct{ id, owner string }{{"kt-alice-1", "alice"}, {"kt-bob-1", "bob"}} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "GridweaveJob",
			"metadata": map[string]any{"name": j.id, "namespace": cfg.Namespace, "labels": map[string]any{"gridweave.dev/kubetorch": "true"}},
			"spec":     map[string]any{"owner": j.owner, "cluster": "train", "submissionId": j.id},
			"status":   map[string]any{"phase": "RUNNING", "message": "epoch 3 of 10"},
		}}
		if _, err := dyn.Resource(jobs).Namespace(cfg.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The machine joins a 1.9.0 master; the master is then upgraded to
	// 2.0.0 (the same ledger and device), and its console shows the
	// machine's agent behind.
	backends := gridweave.Backends{Keyring: kr, Mesh: m, Ray: f.fakes.Client, Kube: f.fakes.Kube, Dynamic: dyn, Now: f.clock.Now}
	before, err := gridweave.New(context.Background(), cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	joinSrv := httptest.NewServer(before.Handler())
	t.Cleanup(joinSrv.Close)
	f.joinURL = joinSrv.URL
	if f.server, err = gridweave.New(context.Background(), config("2.0.0"), backends); err != nil {
		t.Fatal(err)
	}
	// Its background work: the Node informer records pod CIDRs, the
	// console's history samples the fleet.
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = f.server.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	srv := httptest.NewServer(f.server.Handler())
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// join joins the machine through the API with its device's key, as its
// agent would, and brings its tunnel up to the master's device.
func (f *consoleFixture) join(hostname string) {
	t := f.t
	t.Helper()
	h := &harness{t: t, url: f.joinURL, client: http.DefaultClient}
	_, key := h.mint("org")
	n := &node{hostname: hostname, public: f.nodeDev.PublicKey.String()}
	v := h.want(h.validate(n, key), 200, "validate")
	h.want(h.register(n, h100s(2)), 200, "register")
	h.want(h.do("POST", "/v1/nodes/report-version", n.token, map[string]any{"hostname": hostname, "version": "1.9.0"}), 200, "report-version")
	master, err := wgkey.Parse(v.body["master_public_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	f.nodeDev.Up(t, f.nodeNS, n.vpnIP+"/24")
	c, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keepalive := 5 * time.Second
	if err := c.ConfigureDevice(f.nodeDev.Name, wgtypes.Config{Peers: []wgtypes.PeerConfig{{
		PublicKey: wgtypes.Key(master), Endpoint: &net.UDPAddr{IP: net.ParseIP("198.18.230.1"), Port: 51820},
		AllowedIPs: []net.IPNet{{IP: net.ParseIP("198.19.230.0"), Mask: net.CIDRMask(24, 32)}}, PersistentKeepaliveInterval: &keepalive,
	}}}); err != nil {
		t.Fatal(err)
	}

	// Its Kubernetes Node, as k3s registers it, and its Ray worker pod.
	pub, _ := wgkey.Parse(n.public)
	marks, _ := gridweave.NodeMarker(testSecret)
	kubeNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostname, Labels: map[string]string{fleet.MarkLabel: marks.Mark(pub)}},
		Spec: corev1.NodeSpec{PodCIDR: "10.42.7.0/24"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: metav1.Now()},
		}}}
	if _, err := f.fakes.Kube.CoreV1().Nodes().Create(context.Background(), kubeNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool, _ := fleet.PoolOf([]joinkeys.GPU{{Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3"}, {Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3"}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gridweave-cluster-" + pool.Name + "-worker-x7k2p", Namespace: testNamespace,
		Labels: map[string]string{"ray.io/cluster": "gridweave-cluster", "ray.io/node-type": "worker", "ray.io/group": pool.Name}},
		Spec: corev1.PodSpec{NodeName: hostname}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := f.fakes.Kube.CoreV1().Pods(testNamespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *consoleFixture) start() {
	t := f.t
	f.browser = browsertest.Start(t, 1400, 900)
	ctx := f.browser.Ctx
	// The copy button writes the clipboard, and the test reads it back.
	b := chromedp.FromContext(ctx).Browser
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := cdp.Call(ctx, b, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: "granted", Origin: f.url}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	f.ctx = ctx
}

// do runs browser actions, bounded in time.
func (f *consoleFixture) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		f.t.Fatalf("%s: %v\n%s", what, err, f.page())
	}
}

// page describes what the page shows, for a step that failed: where it
// is, its status line and its main content.
func (f *consoleFixture) page() string {
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + "\nstatus: " + document.getElementById("status").textContent + "\nmain: " + document.getElementById("main").innerText`))
	if err != nil {
		return "the page could not be read: " + err.Error()
	}
	return "the page shows: " + shown
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](f *consoleFixture, expr string, opts ...chromedp.EvaluateOption) T {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		f.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the visible text of the first element selector matches.
func (f *consoleFixture) text(selector string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector)))
	if err != nil {
		f.t.Fatalf("read %s: %v", selector, err)
	}
	return s
}

// waitText waits until the element's text contains want.
func (f *consoleFixture) waitText(selector, want string, limit time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(f.ctx, 2*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector)))
		cancel()
		if err == nil && strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s does not show %q within %s; it shows %q (%v)", selector, want, limit, s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// screenshot keeps the page, as it is in the 1400×900 window.
func (f *consoleFixture) screenshot(name string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		f.t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(consoleArtifacts, 0o755); err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(consoleArtifacts, "console-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		f.t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	f.t.Logf("screenshot: %s", abs)
}

// reachesEveryActionByKeyboard presses Tab through the page and checks
// that every link, button, field and list box got the focus.
func (f *consoleFixture) reachesEveryActionByKeyboard(page string) {
	f.t.Helper()
	count := eval[int](f, `(() => {
		const all = [...document.querySelectorAll("a[href], button, input, select, [tabindex]")].filter(e => !e.disabled && e.offsetParent !== null && !e.closest("[hidden]"));
		all.forEach((e, i) => e.dataset.kbd = String(i));
		document.activeElement && document.activeElement.blur();
		return all.length;
	})()`)
	// A blur leaves the browser's starting point for Tab at the element
	// that had the focus, so the presses may begin mid-page and must wrap
	// (through the browser's own stops) to reach the first actions.
	seen := map[string]bool{}
	for range 2*count + 10 {
		if len(seen) == count {
			break
		}
		f.do("tab", chromedp.KeyEvent(kb.Tab))
		id := eval[string](f, `document.activeElement && document.activeElement.dataset.kbd || ""`)
		if id != "" {
			seen[id] = true
		}
	}
	if len(seen) < count {
		missed := eval[[]string](f, fmt.Sprintf(`[...document.querySelectorAll("[data-kbd]")].filter(e => !%s.includes(e.dataset.kbd)).map(e => e.outerHTML.slice(0, 80))`, jsList(seen)))
		f.t.Errorf("%s: Tab reaches %d of %d actions; never %v", page, len(seen), count, missed)
	}
}

func jsList(seen map[string]bool) string {
	var ids []string
	for id := range seen {
		ids = append(ids, fmt.Sprintf("%q", id))
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// TestConsoleInBrowser drives the console in Chromium against a server
// whose mesh is a real wireguard-go device: sign in with the keyboard;
// the joined machine is online once its tunnel handshakes and offline
// when it stops; mint a key, copy its command, revoke it; scale a worker
// group; the node's page (GPUs, history, Kubernetes conditions) and a
// disconnect that names what goes; a user JWT sees only its own jobs.
// Every page is reached action by action with Tab, asks nothing of
// another origin, logs no error, and is kept as a 1400×900 screenshot.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser and wireguard-go")
	}
	f := newConsoleFixture(t)
	f.join("gpu-console-1")
	h := &harness{t: t, url: f.url, client: http.DefaultClient}
	h.want(h.do("POST", "/v1/kuberay/clusters", testAdminToken, map[string]any{"name": "train", "head": map[string]any{"cpu": "1", "memory": "2Gi"},
		"worker_groups": []any{map[string]any{"name": "cpu", "replicas": 1, "max_replicas": 8, "cpu": "1", "memory": "1Gi"}}}), 201, "create a cluster")
	f.start()

	// The page asks for a credential; the keyboard signs in.
	f.do("open /ui/", chromedp.Navigate(f.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	f.screenshot("signin")
	f.reachesEveryActionByKeyboard("sign-in")
	f.do("sign in", chromedp.Focus(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), testAdminToken+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-hostname="gpu-console-1"]`)))

	// Online once the tunnel has handshaken.
	row := `tr[data-hostname="gpu-console-1"]`
	f.waitText(row, "● online", 20*time.Second)
	f.waitText(row, "10.42.7.0/24", 20*time.Second) // the informer recorded the Node's pod CIDR
	for _, want := range []string{"198.19.230.", "NVIDIA H100 80GB HBM3 × 2", "1.9.0", "behind", "gpu-nvidia-", "10.42.7.0/24", "Running"} {
		if got := f.text(row); !strings.Contains(got, want) {
			t.Errorf("the fleet's row lacks %q: %s", want, got)
		}
	}
	f.screenshot("fleet")
	f.reachesEveryActionByKeyboard("fleet")

	// The tunnel stops: no handshake for more than 5 minutes is offline.
	f.nodeNS.IP(t, "link", "set", f.nodeDev.Name, "down")
	f.clock.advance(6 * time.Minute)
	f.waitText(row, "○ offline", 15*time.Second)

	// Keys: mint, copy the command shown once, revoke.
	f.do("open keys", chromedp.Click(chromedp.CSS(`a[href="#/keys"]`)), chromedp.WaitVisible(chromedp.CSS("#key-org")))
	eval[bool](f, `(document.getElementById("key-org").value = "", true)`)
	f.do("mint", chromedp.SendKeys(chromedp.CSS("#key-org"), "acme"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#join-command")))
	command := f.text("#join-command")
	if !strings.Contains(command, "join-node.sh") {
		t.Errorf("the join command shown is %q", command)
	}
	f.screenshot("keys")
	f.do("copy", chromedp.Click(chromedp.CSS(".command button")))
	f.waitText(".command button", "Copied", 5*time.Second)
	copied := eval[string](f, `navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)
	if copied != command {
		t.Errorf("the clipboard holds %q, want the join command %q", copied, command)
	}
	f.reachesEveryActionByKeyboard("keys")
	var keys struct {
		Keys []struct {
			ID      string
			Org     string
			Revoked bool
		}
	}
	_ = json.Unmarshal(h.want(h.do("GET", "/v1/nodes/join-keys", testAdminToken, nil), 200, "keys").raw, &keys)
	minted := keys.Keys[slices.IndexFunc(keys.Keys, func(k struct {
		ID      string
		Org     string
		Revoked bool
	}) bool {
		return k.Org == "acme"
	})].ID
	keyRow := fmt.Sprintf(`tr[data-key=%q]`, minted)
	f.do("revoke", chromedp.Click(chromedp.CSS(keyRow+" button")), chromedp.WaitVisible(chromedp.CSS("dialog[open]")),
		chromedp.Click(chromedp.CSS("dialog[open] button.danger")))
	f.waitText(keyRow, "revoked", 10*time.Second)
	if r := h.do("GET", "/v1/nodes/join-keys", testAdminToken, nil); !strings.Contains(string(r.raw), `"revoked":true`) {
		t.Errorf("the key is not revoked in the ledger: %s", r.raw)
	}

	// Clusters: scale a group.
	f.do("open clusters", chromedp.Click(chromedp.CSS(`a[href="#/clusters"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-group="cpu"]`)))
	eval[bool](f, `(document.querySelector('tr[data-group="cpu"] input').value = "", true)`)
	f.do("scale", chromedp.SendKeys(chromedp.CSS(`tr[data-group="cpu"] input`), "3"), chromedp.Click(chromedp.CSS(`tr[data-group="cpu"] button`)))
	f.waitText(`tr[data-group="cpu"]`, "3 (", 10*time.Second)
	if r := h.do("GET", "/v1/kuberay/clusters/train/worker-groups", testAdminToken, nil); !strings.Contains(string(r.raw), `"replicas":3`) {
		t.Errorf("the group is not scaled in the cluster: %s", r.raw)
	}
	f.screenshot("clusters")
	f.reachesEveryActionByKeyboard("clusters")

	// The node's page, and a disconnect that names what goes.
	f.do("open the node", chromedp.Click(chromedp.CSS(`a[href="#/fleet"]`)), chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.CSS("button.danger")))
	page := f.text("main")
	for _, want := range []string{"GPU-a", "KubeletReady", "validation accepted", "node registered", "first join", "version reported", "version 1.9.0 (was 1.4.2)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the node's page lacks %q", want)
		}
	}
	f.screenshot("node")
	f.reachesEveryActionByKeyboard("node")
	f.do("disconnect", chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitVisible(chromedp.CSS("dialog[open]")))
	goes := f.text("dialog[open]")
	for _, want := range []string{"WireGuard peer", "pod CIDR 10.42.7.0/24", "Ray worker in group gpu-nvidia-", "Kubernetes Node gpu-console-1"} {
		if !strings.Contains(goes, want) {
			t.Errorf("the disconnect's confirmation does not name %q: %s", want, goes)
		}
	}
	f.do("confirm", chromedp.Click(chromedp.CSS("dialog[open] button.danger")), chromedp.WaitVisible(chromedp.CSS(`a[href="#/fleet"][aria-current]`)))
	f.waitText("main", "No node has joined yet.", 10*time.Second)
	h.want(h.do("GET", "/v1/nodes/gpu-console-1", testAdminToken, nil), 404, "the disconnected node")

	// A user signs in: its own jobs, nothing of the fleet.
	f.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	now := f.clock.Now()
	user, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "role": "user", "exp": now.Add(time.Hour).Unix()}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	f.do("sign in as a user", chromedp.SendKeys(chromedp.CSS("#token"), user+kb.Enter), chromedp.WaitVisible(chromedp.CSS(`a[href="#/job/kt-alice-1"]`)))
	if jobs := f.text("main"); strings.Contains(jobs, "kt-bob-1") || !strings.Contains(jobs, "epoch 3 of 10") {
		t.Errorf("a user's jobs page shows: %s", jobs)
	}
	if eval[bool](f, `!document.querySelector('nav a[href="#/fleet"]').hidden`) {
		t.Error("a user is offered the fleet")
	}
	f.screenshot("jobs")
	f.reachesEveryActionByKeyboard("jobs")
	f.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	if eval[string](f, `sessionStorage.getItem("gridweave.console.token") || ""`) != "" {
		t.Error("the credential outlived the sign-out")
	}

	f.browser.CheckOnlyOrigin(t, f.url)
	for _, u := range f.browser.Requests() {
		if strings.Contains(u, testAdminToken) || strings.Contains(u, user) {
			t.Errorf("a credential went into a URL: %s", u)
		}
	}
}
