package wgmesh

import (
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// uapiSet writes what WireGuard's cross-platform interface reads: device
// keys, then each peer from its public_key line, a removal alone.
func TestUAPISetText(t *testing.T) {
	var private, peer, gone, psk wgtypes.Key
	private[0], peer[0], gone[0], psk[0] = 1, 2, 3, 4
	port, mark, keepalive := 51820, 7, 25*time.Second
	text, err := uapiSet(wgtypes.Config{
		PrivateKey: &private, ListenPort: &port, FirewallMark: &mark, ReplacePeers: true,
		Peers: []wgtypes.PeerConfig{
			{PublicKey: peer, UpdateOnly: true, PresharedKey: &psk,
				Endpoint: &net.UDPAddr{IP: net.IPv4(198, 18, 0, 9), Port: 51820}, PersistentKeepaliveInterval: &keepalive,
				ReplaceAllowedIPs: true, AllowedIPs: []net.IPNet{
					{IP: net.IPv4(198, 18, 0, 9).To4(), Mask: net.CIDRMask(32, 32)},
					{IP: net.ParseIP("fd00::"), Mask: net.CIDRMask(64, 128)}}},
			{PublicKey: gone, Remove: true, UpdateOnly: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hexOf := func(first string) string { return first + strings.Repeat("0", 62) }
	want := "private_key=" + hexOf("01") + "\nlisten_port=51820\nfwmark=7\nreplace_peers=true\n" +
		"public_key=" + hexOf("02") + "\nupdate_only=true\npreshared_key=" + hexOf("04") +
		"\nendpoint=198.18.0.9:51820\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\n" +
		"allowed_ip=198.18.0.9/32\nallowed_ip=fd00::/64\n" +
		"public_key=" + hexOf("03") + "\nremove=true\n"
	if text != want {
		t.Fatalf("uapiSet wrote\n%s\nwant\n%s", text, want)
	}
}

// A keepalive WireGuard cannot hold, or an allowed IP without a mask, is
// refused before anything reaches the device.
func TestUAPISetRefusesWhatTheDeviceCannotHold(t *testing.T) {
	for name, p := range map[string]wgtypes.PeerConfig{
		"a keepalive of half a second": {PersistentKeepaliveInterval: new(500 * time.Millisecond)},
		"a keepalive of a day":         {PersistentKeepaliveInterval: new(24 * time.Hour)},
		"an allowed IP without a mask": {AllowedIPs: []net.IPNet{{IP: net.IPv4(198, 18, 0, 1)}}},
	} {
		if _, err := uapiSet(wgtypes.Config{Peers: []wgtypes.PeerConfig{p}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
