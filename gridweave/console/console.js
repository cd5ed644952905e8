// The Gridweave web console: plain JavaScript modules, no build step.
// Every figure comes from the control plane's API, called with the
// credential the person signed in with (kept in this tab's session
// storage). The DOM is built with textContent only: nothing the API
// answers is ever parsed as HTML.

const TOKEN = "gridweave.console.token";
const REFRESH_MS = 5000;

let role = null; // "admin" or "user" once signed in
let timer = null;
let generation = 0; // bumped by every route and sign-out: older refreshes stop

// ---- small helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

let sayTimer = null;

// say shows a message under the navigation: an error until the next one,
// news for a few seconds.
function say(message, kind = "info") {
  const status = document.getElementById("status");
  status.textContent = message || "";
  status.className = message ? kind : "";
  clearTimeout(sayTimer);
  if (message && kind === "info") sayTimer = setTimeout(() => say(""), 6000);
}

function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "—";
}

class APIError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(TOKEN) };
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) {
    if (resp.status === 401) signOut("Your credential was refused (expired or revoked): sign in again.");
    throw new APIError(resp.status, data);
  }
  return data;
}

function gpuSummary(gpus) {
  if (!gpus || gpus.length === 0) return "CPU only";
  const counts = new Map();
  for (const g of gpus) {
    const name = `${g.vendor === "amd" ? "AMD" : "NVIDIA"} ${g.name.replace(/^(NVIDIA|AMD) /, "")}`;
    counts.set(name, (counts.get(name) || 0) + 1);
  }
  return [...counts].map(([n, c]) => `${n} × ${c}`).join(", ");
}

// ---- sign-in and navigation

function signOut(message) {
  sessionStorage.removeItem(TOKEN);
  role = null;
  generation++;
  clearTimeout(timer);
  location.hash = "";
  showSignIn();
  if (message) say(message, "error");
}

function showSignIn() {
  document.getElementById("nav").hidden = true;
  const main = document.getElementById("main");
  main.replaceChildren(el("form", { id: "signin", class: "card signin", onsubmit: signIn },
    el("h1", {}, "Sign in"),
    el("p", {}, "Paste the admin token, an admin JWT or a user JWT. It stays in this tab only (gone when you sign out or close the tab)."),
    el("label", { for: "token" }, "Credential"),
    el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true }),
    el("button", { type: "submit" }, "Sign in")));
  document.getElementById("token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const token = document.getElementById("token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN, token);
  if (await whoAmI()) {
    say("");
    route();
  }
}

// whoAmI finds the role of the stored credential: an admin lists nodes,
// a user is refused that (403) but lists its jobs.
async function whoAmI() {
  try {
    await api("GET", "/v1/nodes?limit=1");
    role = "admin";
  } catch (e) {
    if (e.status !== 403) {
      if (e.status === 401) sessionStorage.removeItem(TOKEN); // else keep it: the server may be away
      say(e.status === 401 ? "That credential is not valid here." : e.message, "error");
      return false;
    }
    role = "user";
  }
  const nav = document.getElementById("nav");
  nav.hidden = false;
  for (const a of nav.querySelectorAll("[data-admin]")) a.hidden = role !== "admin";
  return true;
}

const views = {
  fleet: { admin: true, render: renderFleet },
  node: { admin: true, render: renderNode },
  keys: { admin: true, render: renderKeys },
  clusters: { admin: true, render: renderClusters },
  jobs: { admin: false, render: renderJobs },
  job: { admin: false, render: renderJob },
};

async function route() {
  clearTimeout(timer);
  const mine = ++generation;
  if (!role) return showSignIn();
  const [, name, ...rest] = (location.hash || "").split("/");
  const view = Object.hasOwn(views, name) ? views[name] : null;
  if (!view || (view.admin && role !== "admin")) {
    location.hash = role === "admin" ? "#/fleet" : "#/jobs";
    return;
  }
  for (const a of document.querySelectorAll("nav a")) {
    const current = a.getAttribute("href") === "#/" + name || (name === "node" && a.getAttribute("href") === "#/fleet") || (name === "job" && a.getAttribute("href") === "#/jobs");
    if (current) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  main.replaceChildren();
  try {
    const arg = rest.map(decodeURIComponent).join("/");
    const refresh = await view.render(main, arg);
    // Refresh while this view is the current one, each load after the
    // last has finished (a slow fleet never piles loads up).
    const again = () => {
      if (mine !== generation) return;
      timer = setTimeout(() => refresh().catch((e) => say(e.message, "error")).finally(again), REFRESH_MS);
    };
    if (typeof refresh === "function" && mine === generation) again();
  } catch (e) {
    say(e.message, "error");
  }
}

// ---- fleet

const fleetState = { sort: "hostname", dir: 1, filter: "", online: "all" };

async function renderFleet(main) {
  const chart = el("section", { class: "chart", "aria-label": "Online nodes and GPUs by pool over the last hours" });
  const filter = el("input", { type: "search", placeholder: "Filter by hostname, GPU, group…", "aria-label": "Filter nodes", value: fleetState.filter });
  const online = el("select", { "aria-label": "Show" },
    el("option", { value: "all" }, "All nodes"), el("option", { value: "online" }, "Online"), el("option", { value: "offline" }, "Offline"));
  online.value = fleetState.online;
  const table = el("div");
  const more = el("div");
  main.append(el("h1", {}, "Fleet"), chart, el("div", { class: "toolbar" }, filter, online), table, more);

  let nodes = [];
  let next = "";
  let workers = new Map();

  async function load() {
    const pages = [];
    let token = "";
    do {
      const page = await api("GET", "/v1/nodes?limit=500" + (token ? "&continue=" + encodeURIComponent(token) : ""));
      pages.push(...page.nodes);
      token = page.continue;
    } while (token && pages.length < 5000);
    nodes = pages;
    next = token;
    workers = await workerPods();
    drawChart(chart, (await api("GET", "/v1/nodes/history")).samples);
    draw();
  }

  function draw() {
    const q = fleetState.filter.toLowerCase();
    let rows = nodes.filter((n) => {
      if (fleetState.online === "online" && !n.online) return false;
      if (fleetState.online === "offline" && n.online) return false;
      const text = [n.hostname, n.vpn_ip, n.status, gpuSummary(n.gpus), n.worker_group || "", n.version].join(" ").toLowerCase();
      return text.includes(q);
    });
    const key = {
      hostname: (n) => n.hostname, vpn: (n) => n.vpn_ip.split(".").map((p) => p.padStart(3, "0")).join("."), status: (n) => n.status,
      online: (n) => (n.online ? 1 : 0), gpus: (n) => n.gpus.length, version: (n) => n.version, group: (n) => n.worker_group || "",
    }[fleetState.sort];
    rows = rows.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0) * fleetState.dir);
    const header = (label, sortKey) => {
      if (!sortKey) return el("th", { scope: "col" }, label);
      const sorted = fleetState.sort === sortKey ? (fleetState.dir > 0 ? "ascending" : "descending") : null;
      return el("th", { scope: "col" }, el("button", {
        type: "button", "aria-sort": sorted,
        onclick: () => { fleetState.dir = fleetState.sort === sortKey ? -fleetState.dir : 1; fleetState.sort = sortKey; draw(); },
      }, label));
    };
    const body = rows.map((n) => {
      const w = workers.get(n.hostname);
      const linkText = n.links ? `${n.links.direct} direct, ${n.links.relayed} relayed` + (n.links.connecting ? `, ${n.links.connecting} connecting` : "") : "—";
      return el("tr", { "data-hostname": n.hostname },
        el("td", {}, el("a", { href: "#/node/" + encodeURIComponent(n.hostname) }, n.hostname)),
        el("td", {}, n.vpn_ip),
        el("td", {}, n.status),
        el("td", {}, el("span", { class: n.online ? "online" : "offline", title: "last handshake " + when(n.last_handshake) }, n.online ? "● online" : "○ offline"),
          " ", el("span", { class: "muted" }, ago(n.last_handshake))),
        el("td", {}, gpuSummary(n.gpus)),
        el("td", {}, n.version, n.version_behind ? el("span", { class: "badge warn", title: "older major version than the server's: re-run the join command" }, " behind") : ""),
        el("td", {}, n.pod_cidr || "—"),
        el("td", {}, n.worker_group || "—"),
        el("td", {}, w ? el("span", { class: "badge " + (w.phase === "Running" ? "ok" : "warn"), title: w.reason || "" }, w.phase) : "—"),
        el("td", {}, linkText));
    });
    table.replaceChildren(el("table", { "aria-label": "Nodes" },
      el("thead", {}, el("tr", {}, header("Hostname", "hostname"), header("VPN address", "vpn"), header("Status", "status"), header("Tunnel", "online"),
        header("GPUs", "gpus"), header("Agent", "version"), header("Pod CIDR"), header("Worker group", "group"), header("Worker pod"), header("Links"))),
      el("tbody", {}, body.length ? body : el("tr", {}, el("td", { colspan: 10, class: "muted" }, nodes.length ? "No node matches." : "No node has joined yet.")))));
    more.replaceChildren(next ? el("p", { class: "muted" }, "Showing the first 5000 nodes.") : "");
  }

  filter.addEventListener("input", () => { fleetState.filter = filter.value; draw(); });
  online.addEventListener("change", () => { fleetState.online = online.value; draw(); });
  await load();
  return load;
}

// workerPods maps a Kubernetes Node name to the Ray worker pod on it.
async function workerPods() {
  const out = new Map();
  const { clusters } = await api("GET", "/v1/kuberay/clusters");
  for (const c of clusters) {
    const { workers } = await api("GET", `/v1/kuberay/clusters/${encodeURIComponent(c.name)}/workers`);
    for (const w of workers) if (w.node) out.set(w.node, { ...w, cluster: c.name });
  }
  return out;
}

function drawChart(section, samples) {
  const width = 1000, height = 180, pad = 28;
  const pools = [...new Set(samples.flatMap((s) => Object.keys(s.gpus)))].sort().slice(0, 4);
  const max = Math.max(1, ...samples.map((s) => Math.max(s.online, ...pools.map((p) => s.gpus[p] || 0))));
  const t0 = samples.length ? new Date(samples[0].at).getTime() : 0;
  const t1 = samples.length ? new Date(samples[samples.length - 1].at).getTime() : 1;
  const x = (s) => pad + ((new Date(s.at).getTime() - t0) / Math.max(1, t1 - t0)) * (width - 2 * pad);
  const y = (v) => height - pad - (v / max) * (height - 2 * pad);
  const line = (value, cls) => svg("polyline", { class: cls, points: samples.map((s) => `${x(s).toFixed(1)},${y(value(s)).toFixed(1)}`).join(" ") });
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img",
    "aria-label": `Online nodes and GPUs by pool; now ${samples.length ? samples[samples.length - 1].online : 0} nodes online` },
  svg("line", { class: "axis", x1: pad, y1: height - pad, x2: width - pad, y2: height - pad }),
  svg("line", { class: "axis", x1: pad, y1: pad, x2: pad, y2: height - pad }),
  svg("text", { x: 4, y: pad + 4 }, String(max)), svg("text", { x: 4, y: height - pad }, "0"),
  svg("text", { x: pad, y: height - 8 }, samples.length ? new Date(t0).toLocaleTimeString() : ""),
  svg("text", { x: width - pad - 60, y: height - 8 }, samples.length ? new Date(t1).toLocaleTimeString() : ""),
  line((s) => s.online, "line-online"),
  pools.map((p, i) => line((s) => s.gpus[p] || 0, "line-" + i)));
  const legend = el("p", { class: "legend" }, el("span", { class: "swatch-online" }, "■ online nodes"),
    pools.map((p, i) => el("span", { class: "swatch-" + i }, `■ GPUs in ${p}`)));
  section.replaceChildren(el("h2", {}, "Last hours"), chart, legend);
}

// ---- one node

async function renderNode(main, hostname) {
  const box = el("div");
  main.append(box);
  async function load() {
    const enc = encodeURIComponent(hostname);
    const [{ node }, audit, kube, links] = await Promise.all([api("GET", "/v1/nodes/" + enc), api("GET", `/v1/nodes/${enc}/audit`),
      api("GET", `/v1/nodes/${enc}/kubernetes`), api("GET", `/v1/nodes/${enc}/links`)]);
    const workers = await workerPods();
    const worker = workers.get(hostname);
    box.replaceChildren(
      el("h1", {}, node.hostname, " ", el("span", { class: node.online ? "online" : "offline" }, node.online ? "● online" : "○ offline")),
      el("div", { class: "card grid" },
        el("span", { class: "muted" }, "VPN address"), el("span", {}, node.vpn_ip),
        el("span", { class: "muted" }, "Status"), el("span", {}, node.status),
        el("span", { class: "muted" }, "Last handshake"), el("span", {}, `${when(node.last_handshake)} (${ago(node.last_handshake)})`),
        el("span", { class: "muted" }, "Organisation"), el("span", {}, node.org),
        el("span", { class: "muted" }, "Join key"), el("span", {}, node.join_key_id),
        el("span", { class: "muted" }, "Agent version"), el("span", {}, node.version, node.version_behind ? " (behind the server's major version)" : ""),
        el("span", { class: "muted" }, "Pod CIDR"), el("span", {}, node.pod_cidr || "—"),
        el("span", { class: "muted" }, "Worker group"), el("span", {}, node.worker_group || "none (CPU only)"),
        el("span", { class: "muted" }, "Worker pod"), el("span", {}, worker ? `${worker.name}: ${worker.phase}` : "—"),
        el("span", { class: "muted" }, "Public key"), el("code", {}, node.public_key)),
      el("h2", {}, "GPUs"),
      table(["Index", "Model", "Memory", "UUID"], node.gpus.map((g) => [g.index, g.name, `${g.memory_mib} MiB`, g.uuid]), "No GPU: a CPU-only node."),
      el("h2", {}, "Kubernetes Node"),
      kube.exists && !kube.owned
        ? el("p", { class: "offline" }, "Not this machine's own Node: it does not carry this machine's mark (another machine, an earlier join or an administrator made it). The master routes, labels and drains none of it.")
        : "",
      kube.exists
        ? table(["Condition", "Status", "Reason", "Message", "Since"], kube.conditions.map((c) => [c.type, c.status, c.reason, c.message, when(c.last_transition_time)]), "No condition reported yet.")
        : el("p", { class: "muted" }, "No Kubernetes Node yet: its k3s agent or kubelet has not registered it."),
      el("h2", {}, "Links to other nodes"),
      table(["Node", "State", "Endpoint", "Last handshake", "Received", "Sent"], links.links.map((l) => [l.hostname, l.state, l.endpoint || "—", ago(l.last_handshake), l.rx_bytes, l.tx_bytes]),
        links.reported_at ? "No other node." : "Its link service has not reported."),
      el("h2", {}, "History"),
      table(["When", "What", "Key", "Who / from", "Detail"], audit.events.map((e) => [when(e.at), e.type.replaceAll("_", " "), e.key_id || "—", e.actor || "—", e.reason || ""]), "Nothing recorded."),
      el("h2", {}, "Disconnect"),
      el("p", {}, el("button", { type: "button", class: "danger", onclick: () => confirmDisconnect(node, worker) }, "Disconnect " + node.hostname + "…")));
  }
  await load();
  return load;
}

function table(headers, rows, empty) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.length ? rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))) : el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, empty))));
}

// ask shows a modal dialog naming what an action does; it resolves true
// when the person confirms.
function ask(title, lines, action) {
  return new Promise((resolve) => {
    let answer = false;
    const dialog = el("dialog", { "aria-labelledby": "ask-title" },
      el("h2", { id: "ask-title" }, title),
      lines.length ? el("ul", {}, lines.map((l) => el("li", {}, l))) : "",
      el("p", { class: "toolbar" },
        el("button", { type: "button", class: "secondary", onclick: () => dialog.close() }, "Cancel"),
        el("button", { type: "button", class: "danger", onclick: () => { answer = true; dialog.close(); } }, action)));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(answer); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

async function confirmDisconnect(node, worker) {
  const goes = [
    `its WireGuard peer on the master (VPN address ${node.vpn_ip}): its tunnel stops`,
    node.pod_cidr ? `the master's route to its pod CIDR ${node.pod_cidr}` : null,
    node.gpus.length ? "its DCGM scrape target" : null,
    node.worker_group ? `its Ray worker in group ${node.worker_group}${worker ? ` (pod ${worker.name})` : ""}` : null,
    `the Kubernetes Node ${node.hostname}`,
    `its hostname and VPN address in the ledger (the machine must join again with a new key)`,
  ].filter(Boolean);
  if (!(await ask(`Disconnect ${node.hostname}? This removes:`, goes, "Disconnect"))) return;
  try {
    const r = await api("POST", "/v1/nodes/disconnect", { hostname: node.hostname });
    say(r.released ? `${node.hostname} is disconnected.` : `${node.hostname} had nothing left to remove.`);
    location.hash = "#/fleet";
  } catch (e) { say(e.message, "error"); }
}

// ---- join keys

async function renderKeys(main) {
  const result = el("div");
  const list = el("div");
  const kind = el("select", { id: "key-kind" }, el("option", { value: "org" }, "org"), el("option", { value: "provider" }, "provider"));
  const org = el("input", { id: "key-org", required: true, value: "default" });
  const provider = el("input", { id: "key-provider", placeholder: "(default: the org)" });
  const ttl = el("input", { id: "key-ttl", type: "number", min: 1, value: 24, required: true });
  const uses = el("input", { id: "key-uses", type: "number", min: 0, value: 0 });
  const form = el("form", { class: "card toolbar", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const body = { kind: kind.value, org: org.value.trim(), ttl_seconds: Math.round(Number(ttl.value) * 3600) };
      if (kind.value === "provider" && provider.value.trim()) body.provider = provider.value.trim();
      if (Number(uses.value) > 0) body.max_uses = Number(uses.value);
      const key = await api("POST", "/v1/nodes/join-keys", body);
      showCommand(result, key);
      await load();
    } catch (e) { say(e.message, "error"); }
  } },
  el("label", { for: "key-kind" }, "Kind"), kind, el("label", { for: "key-org" }, "Organisation"), org,
  el("label", { for: "key-provider" }, "Provider"), provider, el("label", { for: "key-ttl" }, "Valid for (hours)"), ttl,
  el("label", { for: "key-uses" }, "Use limit (0: none)"), uses, el("button", { type: "submit" }, "Mint key"));
  main.append(el("h1", {}, "Join keys"), form, result, list);

  async function load() {
    const { keys } = await api("GET", "/v1/nodes/join-keys");
    list.replaceChildren(el("table", { "aria-label": "Join keys" },
      el("thead", {}, el("tr", {}, ["ID", "Kind", "Organisation", "Uses", "Expires", "State", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, keys.length ? keys.map((k) => el("tr", { "data-key": k.id },
        el("td", {}, el("code", {}, k.id)), el("td", {}, k.kind), el("td", {}, k.org + (k.provider ? ` / ${k.provider}` : "")),
        el("td", {}, k.max_uses ? `${k.uses} of ${k.max_uses}` : String(k.uses)), el("td", {}, when(k.expires_at)),
        el("td", {}, k.revoked ? el("span", { class: "badge bad" }, "revoked") : new Date(k.expires_at) < new Date() ? el("span", { class: "badge warn" }, "expired") : el("span", { class: "badge ok" }, "valid")),
        el("td", {}, k.revoked ? "" : el("button", { type: "button", class: "secondary", onclick: () => revoke(k) }, "Revoke")))) :
        el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No key yet.")))));
  }

  async function revoke(k) {
    if (!(await ask(`Revoke key ${k.id}?`, ["Machines that have not joined with it cannot join with it any more.", "Machines that joined with it stay."], "Revoke"))) return;
    try {
      await api("DELETE", "/v1/nodes/join-keys/" + encodeURIComponent(k.id));
      say(`Key ${k.id} is revoked.`);
      await load();
    } catch (e) { say(e.message, "error"); }
  }
  await load();
  return load;
}

function showCommand(box, key) {
  const code = el("code", { id: "join-command" }, key.join_command);
  const copy = el("button", { type: "button", onclick: async () => {
    try {
      await navigator.clipboard.writeText(key.join_command);
      copy.textContent = "Copied";
    } catch {
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      copy.textContent = "Selected: press Ctrl+C";
    }
  } }, "Copy");
  box.replaceChildren(el("div", { class: "card" },
    el("h2", {}, `Key ${key.id} (${key.kind}, ${key.org}) until ${when(key.expires_at)}`),
    el("p", {}, "Paste this on the machine. It holds the key, shown only now: it is stored hashed."),
    el("div", { class: "command" }, code, copy),
    el("p", {}, el("button", { type: "button", class: "secondary", onclick: () => box.replaceChildren() }, "Done"))));
  copy.focus();
}

// ---- clusters

async function renderClusters(main) {
  const box = el("div");
  main.append(el("h1", {}, "Clusters"), box);
  const draining = new Map(); // "cluster/group" → promise of the remove
  async function load() {
    const { clusters } = await api("GET", "/v1/kuberay/clusters");
    const sections = [];
    for (const c of clusters) {
      const { worker_groups: groups } = await api("GET", `/v1/kuberay/clusters/${encodeURIComponent(c.name)}/worker-groups`);
      const { workers } = await api("GET", `/v1/kuberay/clusters/${encodeURIComponent(c.name)}/workers`);
      sections.push(el("section", { class: "card", "data-cluster": c.name },
        el("h2", {}, c.name, " ", el("span", { class: "badge" }, c.state || "unknown"), " ", el("span", { class: "muted" }, `${c.ready_workers} of ${c.desired_workers} workers ready`)),
        el("table", { "aria-label": "Worker groups of " + c.name },
          el("thead", {}, el("tr", {}, ["Group", "Replicas", "Pods", "Running", "Ready", "Pending", "GPUs per pod", "Scale", ""].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, groups.length ? groups.map((g) => groupRow(c.name, g, workers.filter((w) => w.group === g.name))) :
            el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No worker group."))))));
    }
    box.replaceChildren(...(sections.length ? sections : [el("p", { class: "muted" }, "No RayCluster.")]));
  }

  function groupRow(cluster, g, workers) {
    const id = `scale-${cluster}-${g.name}`;
    const input = el("input", { id, type: "number", min: g.min_replicas, max: g.max_replicas || undefined, value: g.replicas, "aria-label": `Replicas of ${g.name}` });
    const pending = workers.filter((w) => w.phase !== "Running").map((w) => `${w.name}: ${w.phase}${w.reason ? ` (${w.reason})` : ""}`);
    const key = `${cluster}/${g.name}`;
    return el("tr", { "data-group": g.name },
      el("td", {}, g.name), el("td", {}, `${g.replicas} (${g.min_replicas}–${g.max_replicas})`), el("td", {}, g.pods), el("td", {}, g.running),
      el("td", {}, g.ready), el("td", {}, pending.length ? pending.join("; ") : "—"), el("td", {}, g.gpus_per_pod),
      el("td", {}, el("span", { class: "toolbar" }, input, el("button", { type: "button", onclick: async () => {
        try {
          await api("PATCH", `/v1/kuberay/clusters/${encodeURIComponent(cluster)}/scale`, { group: g.name, replicas: Number(input.value) });
          say(`${g.name} scaled to ${input.value}.`);
          await load();
        } catch (e) { say(e.message, "error"); }
      } }, "Scale"))),
      el("td", {}, draining.has(key) ? el("span", { class: "badge warn" }, `draining: ${g.pods} pods left`) :
        el("button", { type: "button", class: "danger", onclick: () => removeGroup(cluster, g) }, "Remove…")));
  }

  async function removeGroup(cluster, g) {
    if (!(await ask(`Remove worker group ${g.name} of ${cluster}?`, [`It is drained first: scaled to 0, its ${g.pods} pods stopped, then removed.`], "Remove"))) return;
    const key = `${cluster}/${g.name}`;
    say(`Draining ${g.name}…`);
    const done = api("DELETE", `/v1/kuberay/clusters/${encodeURIComponent(cluster)}/worker-groups/${encodeURIComponent(g.name)}`)
      .then(() => say(`${g.name} is drained and removed.`), (e) => say(e.message, "error"))
      .finally(() => { draining.delete(key); load().catch(() => {}); });
    draining.set(key, done);
    load().catch(() => {});
  }
  await load();
  return load;
}

// ---- KubeTorch jobs

async function renderJobs(main) {
  const box = el("div");
  main.append(el("h1", {}, "KubeTorch jobs"), box);
  async function load() {
    const { jobs } = await api("GET", "/v1/kubetorch/jobs");
    box.replaceChildren(table(["Job", "Owner", "Cluster", "Status", "Message", "Created"],
      jobs.map((j) => [el("a", { href: "#/job/" + encodeURIComponent(j.id) }, j.id), j.owner, j.cluster, j.phase || "submitted", j.message, when(j.created_at)]), "No job yet."));
  }
  await load();
  return load;
}

async function renderJob(main, id) {
  const box = el("div");
  main.append(box);
  async function load() {
    const job = await api("GET", "/v1/kubetorch/jobs/" + encodeURIComponent(id));
    box.replaceChildren(el("h1", {}, "Job ", job.id, " ", el("span", { class: "badge" }, job.status)),
      el("p", {}, `Owner ${job.owner}. ${job.message || ""}`),
      el("h2", {}, "Last log lines"), el("pre", { class: "logs", tabindex: 0 }, (job.logs || []).join("\n") || "(no output yet)"));
  }
  await load();
  return load;
}

// ---- start

document.getElementById("signout").addEventListener("click", () => signOut("Signed out."));
window.addEventListener("hashchange", route);
document.getElementById("signin").addEventListener("submit", signIn);
if (sessionStorage.getItem(TOKEN)) {
  whoAmI().then((ok) => (ok ? route() : showSignIn()));
} else {
  document.getElementById("token").focus();
}
