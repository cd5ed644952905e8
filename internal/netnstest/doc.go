// Package netnstest gives tests their own network hosts: Linux network
// namespaces (ip netns) joined by veth pairs, with addresses from
// 198.18.0.0/15, and a way to run Go code or a command inside one. Every
// namespace and link gets a unique name and is deleted in t.Cleanup. It
// needs root; a test that uses it fails (it does not skip) without it.
package netnstest
