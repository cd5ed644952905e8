package joinagent

import (
	"net/netip"
	"slices"
	"testing"
)

// TestReportedEndpoints: the advertised endpoints first, then the
// machine's own addresses at the device's port, none twice, none inside
// what is excluded, at most maxEndpoints.
func TestReportedEndpoints(t *testing.T) {
	own := ownAddresses("", nil)
	advertised := []netip.AddrPort{netip.MustParseAddrPort("203.0.113.9:4000")}
	for _, a := range own {
		advertised = append(advertised, netip.AddrPortFrom(a, 51820))
	}
	got := reportedEndpoints(advertised, "", 51820, nil)
	want := make([]string, 0, len(advertised))
	for _, ep := range advertised[:min(len(advertised), maxEndpoints)] {
		want = append(want, ep.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v: the advertised ones first, the own ones not again", got, want)
	}
	for i, e := range got {
		if slices.Contains(got[i+1:], e) {
			t.Errorf("%s is reported twice: %v", e, got)
		}
	}
	var excluded []netip.Prefix
	for _, a := range own {
		excluded = append(excluded, netip.PrefixFrom(a, 32))
	}
	if got := reportedEndpoints(nil, "", 51820, excluded); len(got) != 0 {
		t.Errorf("excluded addresses reported: %v", got)
	}
	if got := reportedEndpoints(nil, "", 0, nil); len(got) != 0 {
		t.Errorf("without a listen port: %v", got)
	}
	many := make([]netip.AddrPort, 12)
	for i := range many {
		many[i] = netip.AddrPortFrom(netip.MustParseAddr("203.0.113.1"), uint16(1000+i))
	}
	if got := reportedEndpoints(many, "", 51820, nil); len(got) != maxEndpoints {
		t.Errorf("%d endpoints reported, want at most %d", len(got), maxEndpoints)
	}
}
