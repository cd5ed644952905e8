// Package api holds the wire types of the control-plane service: the JSON
// bodies of every route's request and answer, and the error body. The
// handlers of package gridweave encode them, the join agent
// (gridweave/node/joinagent) sends and decodes them, and the OpenAPI document
// (GET /openapi.json) is built from them, so the join's wire format exists
// once.
//
// The types carry no behaviour beyond their JSON form. Field names are the
// contract (snake_case). A field without omitempty is required in a
// request and always present in an answer (an empty string, an empty list
// or null when not set); the OpenAPI document says so, with the words and
// examples of the fields' description, example and enum tags.
//
// Errors. Every error answer (4xx, 5xx) is an ErrorBody:
//
//	{"error": {"code": "hostname_taken", "message": "...", "field": "hostname"}}
//
// Code is a stable snake_case word a program may switch on; Message is a
// sentence for a person; Field, when present, names the request field that
// was wrong. Some codes carry details beside them (version_mismatch:
// server_version, min_version, worker_version). Each code is a Code
// constant, and ErrorCodes is the status each comes with: the server
// answers by that table and its OpenAPI document lists it.
package api
