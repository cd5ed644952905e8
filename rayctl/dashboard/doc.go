// Package dashboard is a client of the Ray dashboard's REST API on port
// 8265: Serve application statuses (GET /api/serve/applications/), removal
// of one application by name, and the Jobs API (submit, get, list, logs,
// stop, delete). With a token it sends `x-ray-authorization: Bearer
// <token>`.
//
// Ray has no per-application DELETE: PUT /api/serve/applications/ is
// declarative and removes every application it does not list, and DELETE
// removes them all. DeleteApplication therefore reads the declarative
// config (each application's deployed_app_config plus the instance-wide
// options) and PUTs it back without that application. That read and write
// are not atomic on Ray's side; callers that change Serve concurrently must
// serialise.
//
// Responses are decoded tolerantly (unknown fields are kept in Raw), since
// each Ray release adds fields; error responses become *APIError.
package dashboard
