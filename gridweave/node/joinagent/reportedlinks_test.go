package joinagent

import (
	"fmt"
	"slices"
	"testing"

	"gridweave.dev/gridweave/api"
)

// TestReportedLinksFitAReport: a node with more peers than a report holds
// reports the links that say the most (direct, connecting, relayed with
// traffic, then idle relayed ones), in hostname order, and all of them
// when they fit.
func TestReportedLinksFitAReport(t *testing.T) {
	var all []api.Link
	kinds := []api.Link{
		{State: api.LinkRelayed, RelayedReason: api.RelayedIdle},
		{State: api.LinkDirect},
		{State: api.LinkRelayed, RelayedReason: api.RelayedSymmetricNAT},
		{State: api.LinkConnecting},
	}
	for i := range 40 {
		l := kinds[i%len(kinds)]
		l.Hostname = fmt.Sprintf("n%02d", i)
		all = append(all, l)
	}
	if got := reportedLinks(all, 40); !slices.Equal(hostnames(got), hostnames(all)) {
		t.Errorf("links that fit: %v, want all of them", hostnames(got))
	}
	got := reportedLinks(all, 25)
	if len(got) != 25 {
		t.Fatalf("%d links reported, want 25", len(got))
	}
	if !slices.IsSorted(hostnames(got)) {
		t.Errorf("reported out of hostname order: %v", hostnames(got))
	}
	count := map[string]int{}
	for _, l := range got {
		count[string(l.State)+"/"+string(l.RelayedReason)]++
	}
	// Ten of each kind: direct, connecting and busy relayed ones all fit
	// (30 > 25: the busy relayed ones fill what is left), idle ones none.
	if count["direct/"] != 10 || count["connecting/"] != 10 || count["relayed/symmetric_nat"] != 5 || count["relayed/idle"] != 0 {
		t.Errorf("reported %v; want 10 direct, 10 connecting, 5 relayed with traffic, no idle one", count)
	}
	if len(all) != 40 || all[0].Hostname != "n00" {
		t.Error("reportedLinks changed its argument")
	}
}

func hostnames(links []api.Link) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.Hostname
	}
	return out
}
