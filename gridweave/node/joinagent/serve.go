package joinagent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/peering"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/kernelroutes"
	"gridweave.dev/mesh/wgkey"
)

// The link service's timing.
const (
	// peersWait is how long one long poll of the directory waits at the
	// master; under the client's 30 s timeout.
	peersWait = 20 * time.Second
	// stepInterval is how often the links are moved on.
	stepInterval = time.Second
	// maxWatchBackoff bounds the wait between two failed polls.
	maxWatchBackoff = 15 * time.Second
	// defaultReportInterval is how often the links are reported at least
	// (their bytes and handshakes); a change of state is reported at once.
	defaultReportInterval = 30 * time.Second
	// reportTimeout bounds one report.
	reportTimeout = 10 * time.Second
	// flowsEvery is how often the connection tracking is read for links
	// on demand.
	flowsEvery = 2 * time.Second
	// giveUpAfter is how long the links may fail to be brought in line
	// (the device or the master's peer gone) before Serve returns an
	// error, for its service manager to start it again: a new start joins
	// again and brings the tunnel back.
	giveUpAfter = 30 * time.Second
)

// Serve is the node's link service, run after the join until ctx ends
// (`join-node --serve`, a systemd unit): it waits on the master's peer
// directory (a long poll through the tunnel, with the node token,
// resumed after every drop), links this node to each other node directly
// with the master as fallback (package peering), and reports the links.
// When the master is down the links stay as they are; the watch comes
// back with it. A tunnel that is down (after a reboot) is brought up by
// joining again with the node token first. Serve returns nil when the
// node's identity is gone (it left).
func Serve(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	named, ok := o.Tunnel.(interface{ Device() string })
	if !ok || named.Device() == "" {
		return errors.New("joinagent: Serve needs a tunnel that names its WireGuard device")
	}
	device := named.Device()
	st, err := LoadState(o.StateDir, o.Hostname)
	if err != nil {
		return err
	}
	if st.NodeToken == "" {
		return errors.New("joinagent: this machine has not joined: run the join command first")
	}
	if !tunnelUp(ctx, device, st) {
		o.Logger.InfoContext(ctx, "the tunnel is not up: joining again with the node token", "device", device)
		if _, err := Join(ctx, o); err != nil {
			return err
		}
		if st, err = LoadState(o.StateDir, o.Hostname); err != nil {
			return err
		}
	}
	self, err := st.PrivateKey.Public()
	if err != nil {
		return err
	}
	master, err := wgkey.Parse(st.MasterPublicKey)
	if err != nil {
		return fmt.Errorf("joinagent: the identity's master_public_key: %w", err)
	}
	vpn, err := netip.ParsePrefix(st.VPNCIDR)
	if err != nil {
		return fmt.Errorf("joinagent: the identity's vpn_cidr: %w", err)
	}
	po := peering.Options{Self: self, Master: master, MasterPrefixes: []netip.Prefix{vpn}, PodRange: st.PodRange(), HubOnly: o.HubOnly,
		HandshakeTimeout: o.HandshakeTimeout, IdleAfter: o.IdleAfter, Flows: peering.ConntrackFlows{}, FlowsEvery: flowsEvery, Logger: o.Logger}
	if o.IdleAfter < 0 {
		return fmt.Errorf("joinagent: IdleAfter %s is negative: give how long a direct link may go without traffic (0 for the default, 5m)", o.IdleAfter)
	}
	switch o.DirectLinks {
	case DirectLinksAuto, "":
		po.OnDemandAbove = OnDemandAbove
	case DirectLinksAll:
	case DirectLinksOnDemand:
		po.OnDemand = true
	default:
		return fmt.Errorf("joinagent: DirectLinks %q is none of auto, all, on-demand", o.DirectLinks)
	}
	links, err := peering.New(peering.WireGuardDevice{Interface: device}, kernelroutes.Device{Interface: device}, po)
	if err != nil {
		return err
	}
	call := o
	if st.MasterVPNURL != "" {
		call.Master, call.HTTPClient = st.MasterVPNURL, o.tunnelClient()
	}
	o.Logger.InfoContext(ctx, "link service started", "device", device, "master", call.Master, "hub_only", o.HubOnly, "direct_links", o.DirectLinks)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	refused := make(chan error, 1)
	// moved asks for a report now: the links changed state, or the master
	// is back.
	moved := make(chan struct{}, 1)
	var public *Options
	if call.Master != o.Master {
		public = &o
	}
	nat := newNATProber()
	go nat.run(ctx, links, moved, o.Logger)
	go call.watchPeers(ctx, st, links, nat, public, changed, refused, moved)
	interval := o.ReportInterval
	if interval <= 0 {
		interval = defaultReportInterval
	}
	go call.reportLinks(ctx, st, links, nat, device, vpn, interval, moved)

	step := time.NewTicker(stepInterval)
	defer step.Stop()
	var states []api.Link
	var failingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-refused:
			// The master no longer knows this node: the direct peers and
			// their routes go (the tunnel to the master stays for a join).
			if ferr := links.Forget(context.WithoutCancel(ctx)); ferr != nil {
				o.Logger.WarnContext(ctx, "removing the direct peers", "error", ferr)
			}
			return err
		case <-step.C:
		case <-changed:
		}
		if _, err := os.Stat(filepath.Join(o.StateDir, stateFile)); errors.Is(err, os.ErrNotExist) {
			o.Logger.InfoContext(ctx, "this machine left the cluster: the link service stops")
			return nil
		}
		if err := links.Step(ctx); err != nil {
			if failingSince.IsZero() {
				o.Logger.WarnContext(ctx, "the links could not be brought in line", "error", err)
				failingSince = time.Now()
			}
			if time.Since(failingSince) > giveUpAfter {
				return fmt.Errorf("joinagent: the links cannot be brought in line for %s (the tunnel is down?): %w", giveUpAfter, err)
			}
			continue
		}
		failingSince = time.Time{}
		if now := links.Links(); !sameStates(now, states) {
			states = now
			select {
			case moved <- struct{}{}:
			default:
			}
		}
	}
}

// tunnelUp reports whether the device is there with the master's peer, and
// the identity knows the master's key and the VPN.
func tunnelUp(ctx context.Context, device string, st State) bool {
	if st.MasterPublicKey == "" || st.VPNCIDR == "" {
		return false
	}
	if _, err := net.InterfaceByName(device); err != nil {
		return false
	}
	dev, err := peering.WireGuardDevice{Interface: device}.Read(ctx)
	if err != nil {
		return false
	}
	master, err := wgkey.Parse(st.MasterPublicKey)
	return err == nil && slices.ContainsFunc(dev.Peers, func(p peering.DevicePeer) bool { return p.PublicKey == master })
}

// reportLinks reports the links to the master every interval, and at once
// when moved says their states changed, each report bounded by
// reportTimeout; a failure is said once until a report gets through.
func (o *Options) reportLinks(ctx context.Context, st State, links *peering.Manager, nat *natProber, device string, vpn netip.Prefix, interval time.Duration, moved <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-moved:
		}
		// The node's own addresses never name the VPN or a pod (the pod
		// range as the links hold it: an old identity learns it from the
		// directory).
		port, exclude := links.ListenPort(), []netip.Prefix{vpn, links.PodRange().Cluster}
		report := api.LinksReport{Hostname: o.Hostname, ListenPort: port, NAT: nat.nat(), Links: reportedLinks(links.Links(), api.MaxLinksPerReport),
			Endpoints: reportedEndpoints(o.AdvertiseEndpoints, ownAddresses(device, exclude), port)}
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		err := o.post(rctx, "report-links", "/v1/nodes/links", st.NodeToken, report, nil)
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			o.Logger.WarnContext(ctx, "the links were not reported to the master", "error", err)
			failing = true
		case err == nil && failing:
			o.Logger.InfoContext(ctx, "the links are reported again")
			failing = false
		}
	}
}

// sameStates reports whether two reports name the same links in the same
// states (bytes and handshakes move all the time; the interval reports
// them).
func sameStates(a, b []api.Link) bool {
	return slices.EqualFunc(a, b, func(x, y api.Link) bool { return x.PublicKey == y.PublicKey && x.State == y.State })
}

// watchPeers long-polls the directory until ctx ends, handing each answer
// to links and signalling changed (and back when the master answers
// again after a failure); after a failure it waits (1 s,
// doubling to maxWatchBackoff) and resumes with the revision it holds. A
// master that no longer knows the node's token (it was disconnected) is
// final: the error goes to refused.
//
// When the poll through the tunnel fails and public (the join command's
// URL) is set, the directory is asked there at once: after another
// server replica took the WireGuard device over, the tunnel points at the
// old leader's host until the directory's master_endpoint moves it.
func (o *Options) watchPeers(ctx context.Context, st State, links *peering.Manager, nat *natProber, public *Options, changed chan<- struct{}, refused chan<- error, back chan<- struct{}) {
	since, backoff, failing := "", time.Second, false
	var held heldDirectory
	for ctx.Err() == nil {
		asked := time.Now()
		dir, err := o.peers(ctx, st, since)
		var me *MasterError
		if err != nil && public != nil && ctx.Err() == nil {
			// The tunnel does not answer: the master removed this node's
			// peer (a disconnect), or another replica leads now.
			if d, perr := public.peers(ctx, st, ""); perr == nil {
				dir, err = d, nil
			} else if errors.As(perr, &me) && me.Status == http.StatusUnauthorized {
				err = perr
			}
		}
		if errors.As(err, &me) && me.Status == http.StatusUnauthorized {
			refused <- fmt.Errorf("joinagent: the master no longer knows this node (it was disconnected?): join again: %w", err)
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				o.Logger.WarnContext(ctx, "the master's peer directory does not answer; the links stay as they are", "error", err)
			}
			failing = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxWatchBackoff)
			continue
		}
		if failing {
			o.Logger.InfoContext(ctx, "the master's peer directory answers again")
			select {
			case back <- struct{}{}:
			default:
			}
		}
		failing, backoff = false, time.Second
		if dir.Revision == since {
			// The wait is over with nothing new; never faster than a
			// second, whatever answers.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second - time.Since(asked)):
			}
			continue
		}
		if ep, err := netip.ParseAddrPort(dir.MasterEndpoint); err == nil {
			if _, err := links.SetMasterEndpoint(ctx, ep); err != nil {
				o.Logger.WarnContext(ctx, "pointing the master's peer at its new endpoint", "endpoint", ep, "error", err)
			}
		}
		if st.PodRange() == (joinkeys.PodRange{}) {
			// An identity kept before the master said the pod range: the
			// directory says it now, and the identity keeps it.
			st.ClusterCIDR, st.NodeCIDRMask = dir.ClusterCIDR, dir.NodeCIDRMask
			if r := st.PodRange(); r != (joinkeys.PodRange{}) {
				links.SetPodRange(r)
				if err := st.save(o.StateDir); err != nil {
					o.Logger.WarnContext(ctx, "keeping the cluster's pod range in the identity", "error", err)
				}
			}
		}
		nat.setServers(dir.ReflexiveEndpoints)
		if err := links.SetPeers(held.apply(dir)); err != nil {
			o.Logger.WarnContext(ctx, "some nodes of the directory cannot be linked", "error", err)
		}
		since = dir.Revision
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}

// heldDirectory is the peer directory as the agent holds it, brought up
// to date by each answer: a whole directory replaces it, a delta changes
// the peers it names.
type heldDirectory struct {
	peers map[string]api.DirectoryPeer
}

// apply brings the directory up to date with dir and returns its peers,
// by hostname.
func (h *heldDirectory) apply(dir api.PeerDirectory) []api.DirectoryPeer {
	if !dir.Delta || h.peers == nil {
		h.peers = make(map[string]api.DirectoryPeer, len(dir.Peers))
	}
	for _, gone := range dir.Removed {
		delete(h.peers, gone)
	}
	for _, p := range dir.Peers {
		h.peers[p.Hostname] = p
	}
	out := make([]api.DirectoryPeer, 0, len(h.peers))
	for _, p := range h.peers {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b api.DirectoryPeer) int { return strings.Compare(a.Hostname, b.Hostname) })
	return out
}

// peers is one long poll of GET /v1/nodes/peers: with since, the changes
// since that revision (a delta, when the master still knows it).
func (o *Options) peers(ctx context.Context, st State, since string) (api.PeerDirectory, error) {
	q := url.Values{"hostname": {o.Hostname}, "since": {since}, "wait": {strconv.Itoa(int(peersWait.Seconds()))}, "delta": {"true"}}
	if since == "" {
		q.Set("wait", "0")
		q.Del("delta")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Master+"/v1/nodes/peers?"+q.Encode(), nil)
	if err != nil {
		return api.PeerDirectory{}, err
	}
	req.Header.Set("Authorization", "Bearer "+st.NodeToken)
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return api.PeerDirectory{}, fmt.Errorf("peers: reach the master at %s: %w", o.Master, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorBody
		_ = json.Unmarshal(data, &e)
		return api.PeerDirectory{}, &MasterError{Step: "peers", Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	var dir api.PeerDirectory
	if err := json.Unmarshal(data, &dir); err != nil {
		return api.PeerDirectory{}, fmt.Errorf("peers: the master's answer is not the expected JSON: %w", err)
	}
	return dir, nil
}

// reportedLinks is what a report holds of all, the links by hostname:
// all of them when they fit in max, else the max that say the most, in
// hostname order (direct ones first, then those connecting, relayed ones
// with traffic, and idle relayed ones last), so that a node with more
// peers than a report holds still reports instead of being refused.
func reportedLinks(all []api.Link, max int) []api.Link {
	if len(all) <= max {
		return all
	}
	rank := func(l api.Link) int {
		switch {
		case l.State == api.LinkDirect:
			return 0
		case l.State == api.LinkConnecting:
			return 1
		case l.RelayedReason != api.RelayedIdle:
			return 2
		default:
			return 3
		}
	}
	kept := slices.Clone(all)
	slices.SortStableFunc(kept, func(a, b api.Link) int { return cmp.Compare(rank(a), rank(b)) })
	kept = kept[:max]
	slices.SortFunc(kept, func(a, b api.Link) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return kept
}
