package fleet

import (
	"fmt"
	"strconv"
	"strings"
)

// CheckVersion reports whether v is a semantic version: an optional "v",
// MAJOR.MINOR.PATCH, an optional -pre-release and +build.
func CheckVersion(v string) error {
	_, err := major(v)
	return err
}

func major(v string) (int, error) {
	core := strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 || len(v) > 64 {
		return 0, fmt.Errorf("%q is not a semantic version such as 1.4.2", v)
	}
	var m int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return 0, fmt.Errorf("%q is not a semantic version such as 1.4.2", v)
		}
		if i == 0 {
			m = n
		}
	}
	return m, nil
}

// versionGate admits a node at version worker to a server at version
// server when their major versions are equal.
func versionGate(server, worker string) error {
	if worker == "" {
		return invalid("version", "version is required: the worker's semantic version, e.g. 1.4.2")
	}
	wm, err := major(worker)
	if err != nil {
		return invalid("version", "invalid version: %v", err)
	}
	sm, _ := major(server) // checked by New
	if wm == sm {
		return nil
	}
	return &VersionMismatchError{Server: server, Worker: worker, Min: fmt.Sprintf("%d.0.0", sm)}
}

// MajorVersion is the major version of a semantic version.
func MajorVersion(v string) (int, error) { return major(v) }
