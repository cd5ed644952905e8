// Package openapitest holds an HTTP service to its OpenAPI 3.1 document:
// every answer it gives must be one the document describes, its JSON body
// valid against the documented schema (JSON Schema 2020-12, with
// santhosh-tekuri/jsonschema). Middleware checks the answers of a running
// test server; Check checks one answer.
package openapitest
