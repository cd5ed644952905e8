package rayctl

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error of this package that is about one of these
// conditions wraps the sentinel. ErrClusterNotFound and ErrGroupNotFound
// wrap ErrNotFound, so that errors.Is(err, ErrNotFound) holds for every
// missing thing.
var (
	ErrNotFound        = errors.New("not found")
	ErrClusterNotFound = fmt.Errorf("RayCluster %w", ErrNotFound)
	ErrGroupNotFound   = fmt.Errorf("worker group %w", ErrNotFound)
	ErrGroupExists     = errors.New("worker group already exists")
	ErrInvalidSpec     = errors.New("invalid spec")
	// ErrJobStopped is wrapped when a waited-for RayJob was stopped
	// before it finished (KubeRay reports such a job as Complete).
	ErrJobStopped = errors.New("job stopped")
)

// InvalidSpecError names the field that is wrong.
type InvalidSpecError struct {
	Field   string
	Problem string
}

func (e *InvalidSpecError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Problem) }

// Is makes errors.Is(err, ErrInvalidSpec) hold.
func (e *InvalidSpecError) Is(target error) bool { return target == ErrInvalidSpec }

func invalid(field, format string, args ...any) error {
	return &InvalidSpecError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

func clusterNotFound(namespace, name string) error {
	return fmt.Errorf("%w: %s/%s", ErrClusterNotFound, namespace, name)
}

func asInvalid(err error, target **InvalidSpecError) bool { return errors.As(err, target) }
