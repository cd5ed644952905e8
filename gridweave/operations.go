package gridweave

import "reflect"

// operation is what the OpenAPI document says of a route.
type operation struct {
	id          string
	tag         string
	summary     string
	description string
	query       []param
	// request is the JSON body's Go type (a zero value), or nil for none.
	request any
	status  int
	// response is the 2xx answer's Go type (a zero value); responseType
	// defaults to application/json.
	response     any
	responseType string
	// alternatives are other answers by status, not in the error shape.
	alternatives map[int]any
	// codes are the error codes (api.Code…) this route answers besides
	// those routeCodes adds for every route of its kind: its own, and
	// those of the backends it reaches (ledgerCodes, kubernetesCodes, …).
	// The document lists exactly these for the route, and every answer
	// the HTTP tests receive is held to that list.
	codes []string
}

// param is a query parameter.
type param struct {
	name, description string
	typ               reflect.Type
}

// pageParams are a list's paging parameters.
var pageParams = []param{
	{"limit", "At most this many items (1 to 500; default 500).", intParam},
	{"continue", "The `continue` token of the previous page; none for the first.", stringParam},
}

var (
	stringParam = reflect.TypeFor[string]()
	intParam    = reflect.TypeFor[int]()
	boolParam   = reflect.TypeFor[bool]()
)

// pathParams describes the {params} of the paths.
var pathParams = map[string]string{
	"id":       "The join key's id, or the KubeTorch job's.",
	"hostname": "The node's hostname.",
	"name":     "The object's name: a RayCluster, a GridweaveJob or a GridweaveEndpoint (a DNS-1123 name); under by-name, the endpoint's spec.name.",
	"app":      "The Ray Serve application's name.",
	"group":    "The worker group's name.",
	"file":     "The file's name.",
	"os":       "The node's operating system as Go names it (linux).",
	"arch":     "The node's architecture as Go names it (amd64, arm64).",
}
