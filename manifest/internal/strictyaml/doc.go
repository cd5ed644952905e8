// Package strictyaml checks a YAML document against a Go type before it is
// decoded into it: every key must name a field and every scalar must suit
// its field, and a mistake is an *Error naming its path and line. The
// launcher's spec files (package manifest) and the built-in Kubernetes
// objects lint decodes (package manifest/validation) both go through it.
package strictyaml
