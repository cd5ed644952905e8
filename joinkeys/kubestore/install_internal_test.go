package kubestore

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// racingClient is a typedClient of one object that another installer
// creates, then updates, just before each of this one's writes.
type racingClient struct {
	stored  *string // the object: its value
	version int     // bumped by every write, the racer's too
	races   int     // the writes the racer still wins
	seen    int     // the version this installer last read
}

func (c *racingClient) race() bool {
	if c.races == 0 {
		return false
	}
	c.races--
	v := "theirs"
	c.stored = &v
	c.version++
	return true
}

func (c *racingClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*string, error) {
	if c.stored == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, name)
	}
	c.seen = c.version
	v := *c.stored
	return &v, nil
}

func (c *racingClient) Create(_ context.Context, obj *string, _ metav1.CreateOptions) (*string, error) {
	if c.race() || c.stored != nil {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "things"}, "thing")
	}
	c.stored, c.version = obj, c.version+1
	return obj, nil
}

func (c *racingClient) Update(_ context.Context, obj *string, _ metav1.UpdateOptions) (*string, error) {
	if c.race() || c.seen != c.version {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "things"}, "thing", nil)
	}
	c.stored, c.version = obj, c.version+1
	return obj, nil
}

// TestInstallingBesideAnotherReplica: an installer whose create finds
// the object made meanwhile, and whose update then loses to another
// writer, reads again and brings the object to what it wants.
func TestInstallingBesideAnotherReplica(t *testing.T) {
	c := &racingClient{races: 2}
	want := "ours"
	if err := createOrUpdate(context.Background(), c, "thing", &want, func(got *string) { *got = want }); err != nil {
		t.Fatal(err)
	}
	if c.stored == nil || *c.stored != "ours" {
		t.Fatalf("the object is %v, want ours", c.stored)
	}
	// A racer that never stops winning is an error, not a loop.
	c = &racingClient{races: 100}
	if err := createOrUpdate(context.Background(), c, "thing", &want, func(got *string) { *got = want }); !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("against a racer that always wins: %v, want its conflict", err)
	}
}
