// Package jsontree writes a tree of generic values — map[string]any,
// []any, strings, numbers, booleans and nil, as unstructured Kubernetes
// objects and decoded YAML hold them — as JSON, byte for byte as
// encoding/json.Marshal writes it, without reflection.
//
// Validation turns such trees into JSON to decode them strictly into Go
// types, once per object it checks. encoding/json reaches every map entry
// through reflect and allocates a copy of each value on the way; here a
// tree costs the output buffer and, for each map, the slice its keys are
// sorted in. Values of any other type are written by encoding/json itself,
// so the output is always what encoding/json would write
// (TestMarshalMatchesEncodingJSON, FuzzMarshalMatchesEncodingJSON).
package jsontree
