package validation

import (
	"io"

	"gridweave.dev/manifest/internal/yamlstream"
)

// Document is one object read from a stream, with where it came from:
// Source ("file.yaml#2", 1-based; "file.yaml#1.items[3]" for a List's
// item), the Object, Err when the document is not a Kubernetes object, and
// Lines, the line of each field path ("spec.ports[0].port") when it was
// read from YAML, which Lint uses to give each finding a line.
type Document = yamlstream.Document

// DocumentReader reads a YAML or JSON stream one document at a time.
type DocumentReader = yamlstream.DocumentReader

// ReadDocuments splits a multi-document YAML (or JSON) stream into
// objects. Empty documents are skipped; a document that is not a mapping
// with apiVersion and kind is returned with Err set. A List's items are
// returned one by one.
func ReadDocuments(name string, r io.Reader) ([]Document, error) {
	return yamlstream.ReadDocuments(name, r)
}

// LoadDocuments reads the YAML (or JSON) documents of a file; the sources
// of its documents are "path#N".
func LoadDocuments(path string) ([]Document, error) { return yamlstream.LoadDocuments(path) }

// NewDocumentReader reads the stream r, whose documents' sources are
// "name#N".
func NewDocumentReader(name string, r io.Reader) *DocumentReader {
	return yamlstream.NewDocumentReader(name, r)
}
