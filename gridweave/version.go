package gridweave

import (
	"fmt"
	"strconv"
	"strings"
)

// parseVersion reads a semantic version (an optional "v", MAJOR.MINOR.PATCH,
// an optional -pre-release and +build) and returns its major number.
func parseVersion(v string) (major int, err error) {
	core := strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 || len(v) > 64 {
		return 0, fmt.Errorf("%q is not a semantic version such as 1.4.2", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return 0, fmt.Errorf("%q is not a semantic version such as 1.4.2", v)
		}
		if i == 0 {
			major = n
		}
	}
	return major, nil
}

func checkVersion(v string) error {
	_, err := parseVersion(v)
	return err
}

// versionGate returns nil if a worker at version may join a server at
// server: the same major version. Otherwise the 426 answer.
func versionGate(server, worker string) error {
	if worker == "" {
		return &apiError{status: 400, code: "invalid_field", field: "version", message: "version is required: the worker's semantic version, e.g. 1.4.2"}
	}
	wm, err := parseVersion(worker)
	if err != nil {
		return &apiError{status: 400, code: "invalid_field", field: "version", message: "invalid version: " + err.Error()}
	}
	sm, _ := parseVersion(server) // checked at start
	if wm == sm {
		return nil
	}
	return &apiError{
		status:  426,
		code:    "version_mismatch",
		message: fmt.Sprintf("worker version %s is not compatible with server version %s (major versions differ): run update.sh on the node", worker, server),
		header:  map[string]string{"Upgrade": "gridweave-worker/" + server},
		details: map[string]any{"server_version": server, "min_version": fmt.Sprintf("%d.0.0", sm), "worker_version": worker},
	}
}
