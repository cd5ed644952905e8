package operator

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"gridweave.dev/manifest/internal/strictyaml"
	"gridweave.dev/manifest/internal/yamlstream"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

// A RayService's serveConfigV2 is a string the API server never reads and
// the operator hands to Ray Serve: KubeRay v1.6.0 unmarshals it on every
// reconcile (RayServiceReconciler.updateServeDeployment, with
// k8s.io/apimachinery/pkg/util/yaml) and PUTs it to the dashboard's
// /api/serve/applications/, where Ray Serve validates it against its
// config schema (python/ray/serve/schema.py: ServeDeploySchema,
// ServeApplicationSchema, DeploymentSchema, RayActorOptionsSchema,
// LoggingConfig, HTTPOptionsSchema, gRPCOptionsSchema). A config that does
// not parse, or that the schema refuses, leaves the RayService without
// applications at every retry; a key the schema does not know is ignored
// (pydantic's default), so the setting silently has no effect. The schema
// below mirrors the one of the Ray release KubeRay v1.6.0's samples use
// (2.52), field by field; keys of later releases are known too, so that
// they are never called unknown.

// serveNode is one node of Ray Serve's config schema.
type serveNode struct {
	kind string // "object", "list", "map" (free-form dict), "string", "int", "number", "bool", "any"
	// object: its fields; forbid: pydantic extra=forbid (an unknown key
	// is refused, not ignored).
	fields   map[string]*serveNode
	forbid   bool
	required []string
	item     *serveNode // list items
	nullable bool
	// check is a validator of the value (scalars): a problem, or "".
	check func(n *yaml.Node) string
}

var (
	serveLoggingConfig = &serveNode{kind: "object", forbid: true, nullable: true, fields: map[string]*serveNode{
		"encoding":                      {kind: "string", check: oneOf("TEXT", "JSON")},
		"log_level":                     {kind: "any", check: logLevel},
		"logs_dir":                      {kind: "string", nullable: true},
		"enable_access_log":             {kind: "bool"},
		"additional_log_standard_attrs": {kind: "list", item: &serveNode{kind: "string"}},
	}}
	serveRuntimeEnv   = &serveNode{kind: "map", nullable: true, check: remoteURIs}
	serveActorOptions = &serveNode{kind: "object", nullable: true, fields: map[string]*serveNode{
		"runtime_env":         serveRuntimeEnv,
		"num_cpus":            {kind: "number", nullable: true, check: atLeast(0, false)},
		"num_gpus":            {kind: "number", nullable: true, check: atLeast(0, false)},
		"memory":              {kind: "number", nullable: true, check: atLeast(0, false)},
		"object_store_memory": {kind: "number", nullable: true, check: atLeast(0, false)},
		"resources":           {kind: "map", nullable: true},
		"accelerator_type":    {kind: "string", nullable: true},
	}}
	serveDeployment = &serveNode{kind: "object", required: []string{"name"}, fields: map[string]*serveNode{
		"name":                          {kind: "string"},
		"num_replicas":                  {kind: "any", nullable: true, check: numReplicas},
		"max_ongoing_requests":          {kind: "int", check: atLeast(0, true)},
		"max_queued_requests":           {kind: "int", check: maxQueued},
		"max_concurrent_queries":        {kind: "int", check: atLeast(0, true)},
		"user_config":                   {kind: "any", nullable: true},
		"autoscaling_config":            {kind: "map", nullable: true},
		"graceful_shutdown_wait_loop_s": {kind: "number", check: atLeast(0, false)},
		"graceful_shutdown_timeout_s":   {kind: "number", check: atLeast(0, false)},
		"health_check_period_s":         {kind: "number", check: atLeast(0, true)},
		"health_check_timeout_s":        {kind: "number", check: atLeast(0, true)},
		"ray_actor_options":             serveActorOptions,
		"placement_group_bundles":       {kind: "list", item: &serveNode{kind: "map"}},
		"placement_group_strategy":      {kind: "string"},
		"max_replicas_per_node":         {kind: "int", nullable: true},
		"logging_config":                serveLoggingConfig,
		"request_router_config":         {kind: "map"},
	}}
	serveApplication = &serveNode{kind: "object", required: []string{"import_path"}, fields: map[string]*serveNode{
		"name":                    {kind: "string", check: nonEmpty},
		"route_prefix":            {kind: "string", nullable: true, check: routePrefix},
		"import_path":             {kind: "string", check: importPath},
		"runtime_env":             serveRuntimeEnv,
		"host":                    {kind: "string", check: notPerApplication("host")},
		"port":                    {kind: "int", check: notPerApplication("port")},
		"deployments":             {kind: "list", item: serveDeployment},
		"autoscaling_policy":      {kind: "map", nullable: true},
		"args":                    {kind: "map", nullable: true},
		"logging_config":          serveLoggingConfig,
		"external_scaler_enabled": {kind: "bool"},
	}}
	serveConfigSchema = &serveNode{kind: "object", required: []string{"applications"}, fields: map[string]*serveNode{
		"proxy_location": {kind: "string", check: oneOf("Disabled", "HeadOnly", "EveryNode")},
		"http_options": {kind: "object", fields: map[string]*serveNode{
			"host": {kind: "string"}, "port": {kind: "int"}, "root_path": {kind: "string"},
			"request_timeout_s": {kind: "number", nullable: true}, "keep_alive_timeout_s": {kind: "int"},
			"ssl_keyfile": {kind: "string", nullable: true}, "ssl_certfile": {kind: "string", nullable: true},
			"ssl_keyfile_password": {kind: "string", nullable: true}, "ssl_ca_certs": {kind: "string", nullable: true},
		}},
		"grpc_options": {kind: "object", fields: map[string]*serveNode{
			"port": {kind: "int"}, "grpc_servicer_functions": {kind: "list", item: &serveNode{kind: "string"}},
			"request_timeout_s": {kind: "number", nullable: true},
		}},
		"logging_config":  serveLoggingConfig,
		"applications":    {kind: "list", item: serveApplication},
		"target_capacity": {kind: "number", nullable: true, check: between(0, 100)},
	}}
)

// serveProblem is one finding inside a serve config: the path inside it,
// its line there (1-based), and whether Ray Serve refuses the config
// (error) or ignores the key (warning).
type serveProblem struct {
	path, message, fix string
	line               int
	refused            bool
}

// checkServeConfig reads a serveConfigV2 as the operator does and holds
// it to Ray Serve's schema.
func checkServeConfig(config string) []serveProblem {
	var asOperator map[string]any
	if err := k8syaml.Unmarshal([]byte(config), &asOperator); err != nil {
		var node yaml.Node
		line := 0
		if perr := yaml.Unmarshal([]byte(config), &node); perr != nil {
			line = strictyaml.ErrorLine(perr)
		}
		return []serveProblem{{message: fmt.Sprintf("is not a YAML mapping the operator can read (%v): it fails at every reconcile and the RayService never serves", err),
			fix: "fix the YAML (a block scalar: serveConfigV2: |, then the config indented below)", line: line, refused: true}}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(config), &doc); err != nil || len(doc.Content) == 0 {
		return nil // read by the operator's parser, not by this one: nothing more to say
	}
	if asOperator == nil || hasMergeKey(&doc) {
		// Empty or null (the operator's business, said nowhere here), or
		// merge keys the node walk below does not expand.
		return nil
	}
	var out []serveProblem
	walkServeConfig(doc.Content[0], serveConfigSchema, "", &out)
	checkApplications(doc.Content[0], &out)
	return out
}

func walkServeConfig(n *yaml.Node, s *serveNode, path string, out *[]serveProblem) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	refuse := func(n *yaml.Node, p, msg, fix string) {
		*out = append(*out, serveProblem{path: p, message: msg, fix: fix, line: n.Line, refused: true})
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		if !s.nullable && s.kind != "any" {
			refuse(n, path, "is null; Ray Serve refuses a null here", "give it a value or leave the key out")
		}
		return
	}
	if s.check != nil {
		if problem := s.check(n); problem != "" {
			refuse(n, path, problem, "")
			return
		}
	}
	switch s.kind {
	case "object":
		if n.Kind != yaml.MappingNode {
			refuse(n, path, "must be a mapping; Ray Serve refuses the config", "")
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			p := yamlstream.JoinPath(path, key.Value)
			seen[key.Value] = true
			field, known := s.fields[key.Value]
			switch {
			case known:
				walkServeConfig(value, field, p, out)
			case s.forbid:
				refuse(key, p, "is not a field Ray Serve knows here, and it refuses unknown fields here"+nearestField(key.Value, s.fields), "remove it or fix its spelling")
			default:
				*out = append(*out, serveProblem{path: p, line: key.Line,
					message: "is not a field Ray Serve knows here: it ignores the key, so the setting has no effect" + nearestField(key.Value, s.fields),
					fix:     "remove it or fix its spelling"})
			}
		}
		for _, r := range s.required {
			if !seen[r] {
				refuse(n, yamlstream.JoinPath(path, r), "is required; Ray Serve refuses the config without it", "")
			}
		}
		if s == serveDeployment {
			checkDeploymentOptions(n, path, out)
		}
	case "list":
		if n.Kind != yaml.SequenceNode {
			refuse(n, path, "must be a list; Ray Serve refuses the config", "")
			return
		}
		for i, item := range n.Content {
			walkServeConfig(item, s.item, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case "map":
		if n.Kind != yaml.MappingNode {
			refuse(n, path, "must be a mapping; Ray Serve refuses the config", "")
		}
	case "string", "int", "number", "bool":
		if n.Kind != yaml.ScalarNode {
			refuse(n, path, fmt.Sprintf("must be a single value (%s), not %s; Ray Serve refuses the config", describeServeKind(s.kind), strictyaml.NodeKind(n)), "")
			return
		}
		if problem := scalarProblem(n, s.kind); problem != "" {
			refuse(n, path, problem, "")
		}
	}
}

func describeServeKind(kind string) string {
	switch kind {
	case "int":
		return "an integer"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	}
	return "a string"
}

// scalarProblem is what pydantic refuses in a scalar of a kind; it
// coerces numbers written as text and integral numbers, so those pass.
func scalarProblem(n *yaml.Node, kind string) string {
	switch kind {
	case "int", "number":
		// pydantic v1 takes a float for an int (truncating it), numbers
		// written as text, and true and false as 1 and 0.
		if _, ok := numberValue(n); !ok {
			return fmt.Sprintf("must be a number, got %q; Ray Serve refuses the config", n.Value)
		}
	case "bool":
		switch strings.ToLower(n.Value) {
		case "true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0":
		default:
			return fmt.Sprintf("must be true or false, got %q; Ray Serve refuses the config", n.Value)
		}
	}
	return ""
}

// numberValue reads a number as the operator's YAML parser and pydantic
// would: decimal, hex or octal, a float, or a bool.
func numberValue(n *yaml.Node) (float64, bool) {
	v := strings.TrimSpace(n.Value)
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) {
		return f, true
	}
	if i, err := strconv.ParseInt(v, 0, 64); err == nil {
		return float64(i), true
	}
	switch strings.ToLower(v) {
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	return 0, false
}

func intValue(n *yaml.Node) (int64, bool) {
	f, ok := numberValue(n)
	return int64(f), ok // pydantic v1 truncates
}

func atLeast(min float64, strict bool) func(*yaml.Node) string {
	return func(n *yaml.Node) string {
		f, ok := numberValue(n)
		if !ok {
			return ""
		}
		if strict && f <= min {
			return fmt.Sprintf("must be greater than %g, got %s; Ray Serve refuses the config", min, n.Value)
		}
		if !strict && f < min {
			return fmt.Sprintf("must be at least %g, got %s; Ray Serve refuses the config", min, n.Value)
		}
		return ""
	}
}

func between(lo, hi float64) func(*yaml.Node) string {
	return func(n *yaml.Node) string {
		if f, ok := numberValue(n); ok && (f < lo || f > hi) {
			return fmt.Sprintf("must be between %g and %g, got %s; Ray Serve refuses the config", lo, hi, n.Value)
		}
		return ""
	}
}

func oneOf(values ...string) func(*yaml.Node) string {
	return func(n *yaml.Node) string {
		if n.Kind == yaml.ScalarNode && !slices.Contains(values, n.Value) {
			return fmt.Sprintf("must be one of %s, got %q; Ray Serve refuses the config", strings.Join(values, ", "), n.Value)
		}
		return ""
	}
}

func nonEmpty(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Value == "" {
		return "is empty; Ray Serve refuses an application without a name"
	}
	return ""
}

func logLevel(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "must be a log level name or number; Ray Serve refuses the config"
	}
	names := []string{"CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET"}
	if i, ok := intValue(n); ok {
		if slices.Contains([]int64{0, 10, 20, 30, 40, 50}, i) {
			return ""
		}
	} else if slices.Contains(names, n.Value) {
		return ""
	}
	return fmt.Sprintf("must be one of %s (or their numbers), got %q; Ray Serve refuses the config", strings.Join(names, ", "), n.Value)
}

func numReplicas(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		return ""
	}
	if i, ok := intValue(n); !ok || i < 1 {
		return fmt.Sprintf(`must be a positive integer or "auto", got %q; Ray Serve refuses the config`, n.Value)
	}
	return ""
}

func maxQueued(n *yaml.Node) string {
	if i, ok := intValue(n); ok && i < 1 && i != -1 {
		return fmt.Sprintf("must be -1 (no limit) or a positive integer, got %s; Ray Serve refuses the config", n.Value)
	}
	return ""
}

func notPerApplication(field string) func(*yaml.Node) string {
	return func(*yaml.Node) string {
		return fmt.Sprintf("is set for an application; Ray Serve refuses a multi-application config that sets %s per application", field)
	}
}

// routePrefix is Ray Serve's rule: it starts with "/", ends without one
// (but "/"), and has no wildcards.
func routePrefix(n *yaml.Node) string {
	v := n.Value
	switch {
	case n.Kind != yaml.ScalarNode:
		return ""
	case !strings.HasPrefix(v, "/"):
		return fmt.Sprintf(`%q does not start with "/"; Ray Serve refuses the config`, v)
	case len(v) > 1 && strings.HasSuffix(v, "/"):
		return fmt.Sprintf(`%q ends with "/" (only "/" itself may); Ray Serve refuses the config`, v)
	case strings.ContainsAny(v, "{}"):
		return fmt.Sprintf(`%q has a wildcard ("{" or "}"); Ray Serve refuses the config`, v)
	}
	return ""
}

// importPath is Ray Serve's rule: module.attribute or module:attribute.
func importPath(n *yaml.Node) string {
	v := n.Value
	if n.Kind != yaml.ScalarNode {
		return ""
	}
	if strings.Contains(v, ":") {
		if strings.Count(v, ":") > 1 || strings.HasPrefix(v, ":") || strings.HasSuffix(v, ":") {
			return fmt.Sprintf(`%q is not module:attribute (one colon, not at either end); Ray Serve refuses the config`, v)
		}
		return ""
	}
	if !strings.Contains(v, ".") || strings.HasPrefix(v, ".") || strings.HasSuffix(v, ".") {
		return fmt.Sprintf(`%q names no module and attribute (module.attribute or module:attribute); Ray Serve refuses the config`, v)
	}
	return ""
}

// remoteURIs: a Serve config's working_dir and py_modules must be remote
// URIs (s3://, gs://, https://...zip); a local path is refused.
func remoteURIs(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	var uris []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch key, value := n.Content[i].Value, n.Content[i+1]; key {
		case "working_dir":
			uris = append(uris, value)
		case "py_modules":
			if value.Kind == yaml.SequenceNode {
				uris = append(uris, value.Content...)
			}
		}
	}
	for _, u := range uris {
		if u.Kind == yaml.ScalarNode && u.Tag != "!!null" && !strings.Contains(u.Value, "://") {
			return fmt.Sprintf("runtime_env names %q, a local path: a Serve config takes only remote URIs (s3://, gs://, https://.../x.zip) in working_dir and py_modules, and Ray Serve refuses it", u.Value)
		}
	}
	return ""
}

// hasMergeKey reports whether a YAML tree uses a merge key (<<).
func hasMergeKey(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "<<" {
				return true
			}
		}
	}
	for _, c := range n.Content {
		if hasMergeKey(c) {
			return true
		}
	}
	return false
}

// checkDeploymentOptions are DeploymentSchema's cross-field rules.
func checkDeploymentOptions(n *yaml.Node, path string, out *[]serveProblem) {
	value := func(key string) *yaml.Node {
		v := yamlstream.MappingValue(n, key)
		if v != nil && v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return nil
		}
		return v
	}
	if r := value("num_replicas"); r != nil && r.Value != "auto" && value("autoscaling_config") != nil {
		*out = append(*out, serveProblem{path: yamlstream.JoinPath(path, "num_replicas"), line: r.Line, refused: true,
			message: "is set together with autoscaling_config; Ray Serve refuses the config", fix: `use num_replicas: auto, or leave it out`})
	}
	if m := value("max_replicas_per_node"); m != nil && value("placement_group_bundles") != nil {
		*out = append(*out, serveProblem{path: yamlstream.JoinPath(path, "max_replicas_per_node"), line: m.Line, refused: true,
			message: "is set together with placement_group_bundles; Ray Serve refuses the config"})
	}
}

// checkApplications are ServeDeploySchema's rules across applications:
// unique names and unique route prefixes.
func checkApplications(root *yaml.Node, out *[]serveProblem) {
	apps := yamlstream.MappingValue(root, "applications")
	if apps == nil || apps.Kind != yaml.SequenceNode {
		return
	}
	names, routes := map[string]bool{}, map[string]bool{}
	for i, app := range apps.Content {
		if app.Kind == yaml.AliasNode {
			app = app.Alias
		}
		if app.Kind != yaml.MappingNode {
			continue
		}
		name := "default" // SERVE_DEFAULT_APP_NAME
		nameNode := yamlstream.MappingValue(app, "name")
		if nameNode != nil && nameNode.Kind == yaml.ScalarNode {
			name = nameNode.Value
		}
		if names[name] {
			line := app.Line
			if nameNode != nil {
				line = nameNode.Line
			}
			*out = append(*out, serveProblem{path: fmt.Sprintf("applications[%d].name", i), line: line, refused: true,
				message: fmt.Sprintf("%q names two applications; Ray Serve refuses the config", name), fix: "give each application its own name"})
		}
		names[name] = true
		route := "/"
		routeNode := yamlstream.MappingValue(app, "route_prefix")
		if routeNode != nil {
			if routeNode.Tag == "!!null" {
				continue // no HTTP route
			}
			route = routeNode.Value
		}
		if routes[route] {
			line := app.Line
			if routeNode != nil {
				line = routeNode.Line
			}
			*out = append(*out, serveProblem{path: fmt.Sprintf("applications[%d].route_prefix", i), line: line, refused: true,
				message: fmt.Sprintf("%q is the route of two applications; Ray Serve refuses the config", route), fix: "give each application its own route_prefix"})
		}
		routes[route] = true
	}
}

// nearestField names the known field closest to key, if one is close.
func nearestField(key string, fields map[string]*serveNode) string {
	if best := strictyaml.Nearest(key, slices.Collect(maps.Keys(fields))); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}
