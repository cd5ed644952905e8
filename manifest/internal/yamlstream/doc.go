// Package yamlstream reads users' YAML and JSON as a stream of Kubernetes
// objects, one document (or one item of a List, in block style or JSON) at
// a time, each with the line of every field path, in bounded memory and in
// parallel where a List allows it. DocumentReader is held to yaml's own
// decoder reading the whole stream (TestDocumentReaderReadsAsTheWholeTree,
// FuzzDocumentReader). Package validation re-exports it.
package yamlstream
