// Package tlspin is the trust between a joining machine and its master:
// the master's certificate is pinned by the SHA-256 of its public key
// (its SubjectPublicKeyInfo), the value the join command carries, in the
// form curl's --pinnedpubkey takes ("sha256//" and the base64 digest).
//
// The master side keeps one key pair: LoadOrCreate reads it, or makes a
// self-signed one at first start and keeps it (the key 0600), so the pin
// in every join command handed out stays good across restarts. The node
// side dials with ClientConfig, which accepts exactly the certificate
// whose key matches the pin, whatever CA signed it (or none): the pin
// replaces CA verification, so a self-signed certificate is as good as
// a CA's, and a man in the middle with any other key is refused before a
// byte of the request is sent.
//
// The package uses the standard library only: the join agent links it.
package tlspin
