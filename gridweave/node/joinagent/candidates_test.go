package joinagent

import (
	"net/netip"
	"slices"
	"testing"
)

// TestReportedEndpoints: the advertised endpoints first, then the
// machine's own addresses at the device's port, none twice, at most
// maxEndpoints.
func TestReportedEndpoints(t *testing.T) {
	advertised := []netip.AddrPort{
		netip.MustParseAddrPort("203.0.113.9:4000"),
		netip.MustParseAddrPort("192.0.2.2:51820"),
	}
	own := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.7")}
	got := reportedEndpoints(advertised, own, 51820)
	want := []string{"203.0.113.9:4000", "192.0.2.2:51820", "192.0.2.7:51820"}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v: the advertised ones first, the own ones not again", got, want)
	}
	if got := reportedEndpoints(nil, own, 0); len(got) != 0 {
		t.Errorf("without a listen port: %v", got)
	}
	many := make([]netip.AddrPort, 12)
	for i := range many {
		many[i] = netip.AddrPortFrom(netip.MustParseAddr("203.0.113.1"), uint16(1000+i))
	}
	if got := reportedEndpoints(many, own, 51820); len(got) != maxEndpoints {
		t.Errorf("%d endpoints reported, want at most %d", len(got), maxEndpoints)
	}
}

// TestOwnAddresses: this machine's addresses sorted and each once (other
// tests may add interfaces meanwhile, so nothing here compares two
// reads), and none inside what is excluded; an address two interfaces
// hold is named once.
func TestOwnAddresses(t *testing.T) {
	twice := []netip.Addr{netip.MustParseAddr("198.18.0.9"), netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.9")}
	if got, want := sortedOnce(twice), []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.9")}; !slices.Equal(got, want) {
		t.Errorf("sortedOnce(%v) = %v, want %v", twice, got, want)
	}
	own := ownAddresses("", nil)
	if !slices.IsSortedFunc(own, netip.Addr.Compare) {
		t.Errorf("own addresses not sorted: %v", own)
	}
	for i := 1; i < len(own); i++ {
		if own[i] == own[i-1] {
			t.Errorf("%s named twice: %v", own[i], own)
		}
	}
	for _, a := range own {
		if !a.Is4() || !a.IsGlobalUnicast() {
			t.Errorf("%s is not a global unicast IPv4 address", a)
		}
	}
	everything := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	if got := ownAddresses("", everything); len(got) != 0 {
		t.Errorf("excluded addresses reported: %v", got)
	}
}
