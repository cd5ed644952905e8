package joinkeys

import (
	"fmt"
	"log/slog"
)

// The types below carry secrets (a join key, a node token). Each formats
// and logs itself without them, so that a request or result passed to a
// logger or an error message by mistake leaks nothing; the secret fields
// stay readable by code that means to use them.

const redacted = "[redacted]"

func secretMark(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// LogValue implements slog.LogValuer: the key without its secret.
func (m MintedKey) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", m.ID), slog.String("kind", string(m.Kind)), slog.String("org", m.Org),
		slog.Time("expires_at", m.ExpiresAt), slog.String("secret", secretMark(m.Secret)))
}

// String describes the key without its secret.
func (m MintedKey) String() string {
	return fmt.Sprintf("MintedKey{ID:%s Kind:%s Org:%s ExpiresAt:%s Secret:%s}", m.ID, m.Kind, m.Org, m.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"), secretMark(m.Secret))
}

// GoString is String, so that %#v redacts too.
func (m MintedKey) GoString() string { return m.String() }

// LogValue implements slog.LogValuer: the request without its key or token.
func (r JoinRequest) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("hostname", r.Hostname), slog.String("public_key", r.PublicKey), slog.String("version", r.Version),
		slog.String("key", secretMark(r.Key)), slog.String("node_token", secretMark(r.NodeToken)), slog.String("source", r.Source))
}

// String describes the request without its key or token.
func (r JoinRequest) String() string {
	return fmt.Sprintf("JoinRequest{Hostname:%s PublicKey:%s Version:%s Key:%s NodeToken:%s Source:%s}",
		r.Hostname, r.PublicKey, r.Version, secretMark(r.Key), secretMark(r.NodeToken), r.Source)
}

// GoString is String, so that %#v redacts too.
func (r JoinRequest) GoString() string { return r.String() }

// LogValue implements slog.LogValuer: the result without its node token.
func (r JoinResult) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("hostname", r.Node.Hostname), slog.String("vpn_ip", r.Node.VPNIP.String()),
		slog.Bool("rejoined", r.Rejoined), slog.String("node_token", secretMark(r.NodeToken)))
}

// String describes the result without its node token.
func (r JoinResult) String() string {
	return fmt.Sprintf("JoinResult{Hostname:%s VPNIP:%s Rejoined:%t NodeToken:%s}", r.Node.Hostname, r.Node.VPNIP, r.Rejoined, secretMark(r.NodeToken))
}

// GoString is String, so that %#v redacts too.
func (r JoinResult) GoString() string { return r.String() }

// LogValue implements slog.LogValuer: the registration without its key or token.
func (r Registration) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("hostname", r.Hostname), slog.String("public_key", r.PublicKey), slog.String("version", r.Version),
		slog.Int("gpus", len(r.GPUs)), slog.String("key", secretMark(r.Key)), slog.String("node_token", secretMark(r.NodeToken)),
		slog.String("source", r.Source))
}

// String describes the registration without its key or token.
func (r Registration) String() string {
	return fmt.Sprintf("Registration{Hostname:%s PublicKey:%s Version:%s GPUs:%d Key:%s NodeToken:%s Source:%s}",
		r.Hostname, r.PublicKey, r.Version, len(r.GPUs), secretMark(r.Key), secretMark(r.NodeToken), r.Source)
}

// GoString is String, so that %#v redacts too.
func (r Registration) GoString() string { return r.String() }
