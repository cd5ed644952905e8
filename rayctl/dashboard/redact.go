package dashboard

import (
	"fmt"
	"log/slog"
)

// Options and Client hold the dashboard's bearer token; they format and log
// themselves without it.

func tokenMark(token string) string {
	if token == "" {
		return "none"
	}
	return "[redacted]"
}

// String describes the options without the token.
func (o Options) String() string {
	return fmt.Sprintf("dashboard.Options{Token:%s}", tokenMark(o.Token))
}

// GoString is String, so that %#v redacts too.
func (o Options) GoString() string { return o.String() }

// LogValue implements slog.LogValuer without the token.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.String()) }

// String names the dashboard the client talks to, without the token.
func (c *Client) String() string {
	return fmt.Sprintf("dashboard.Client{%s token:%s}", c.base.Redacted(), tokenMark(c.token))
}

// GoString is String, so that %#v redacts too.
func (c *Client) GoString() string { return c.String() }

// LogValue implements slog.LogValuer without the token.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }
