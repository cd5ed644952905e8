package kubetorch

import (
	"bytes"
	"errors"
	"testing"
)

// TestCapWriterStopsBeforeRaysLimit: the package stream passes bytes up to
// the limit and fails, passing nothing more, at the write that would reach
// it — what makes a bundle too large for Ray a 400 instead of Ray's 500.
func TestCapWriterStopsBeforeRaysLimit(t *testing.T) {
	var out bytes.Buffer
	w := &capWriter{w: &out, max: 10}
	if n, err := w.Write([]byte("12345")); n != 5 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("67890")); n != 0 || !errors.Is(err, ErrPackageTooLarge) {
		t.Fatalf("the write reaching the limit: %d, %v", n, err)
	}
	if out.String() != "12345" {
		t.Fatalf("passed on %q", out.String())
	}
}
