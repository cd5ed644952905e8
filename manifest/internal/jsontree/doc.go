// Package jsontree writes a tree of generic values — map[string]any,
// []any, strings, numbers, booleans and nil, as unstructured Kubernetes
// objects and decoded YAML hold them — as JSON, byte for byte as
// encoding/json.Marshal writes it, without reflection.
//
// Validation turns such trees into JSON to decode them strictly into Go
// types, once per object it checks. encoding/json reaches every map entry
// through reflect and allocates a copy of each value on the way; here
// Marshal allocates its result (the buffer it writes in is pooled) and,
// for each map of more than 16 keys, the slice they are sorted in.
// Values of any other type (json.Number, time.Time, typed maps and
// slices), and whatever lies over a thousand levels deep, where
// encoding/json starts looking for a tree that contains itself, are
// written by encoding/json itself: the bytes and the errors are
// encoding/json's (TestMarshalMatchesEncodingJSON over a table and 50,000
// generated trees, FuzzMarshalMatchesEncodingJSON).
package jsontree
