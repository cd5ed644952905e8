// Package serverenv is the server program's environment: the variables
// it reads into a gridweave.Config (Read), their defaults (the Config's,
// gridweave.DefaultConfig), and the names the program's users read in its
// messages (Name, Explain). docs/server.md's table lists them.
//
// The library knows settings by their Config field names; this package
// maps each to its variable, so that a refusal of the library's says
// JWT_SECRET to the server's users where it says Config.JWTSecret to a
// program that embeds the library.
package serverenv
