package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(context.Background(), nil, &out, &errs); code != 2 || !strings.Contains(errs.String(), "--master is required") {
		t.Errorf("no --master: %d %q", code, errs.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"--version"}, &out, &errs); code != 0 || strings.TrimSpace(out.String()) != version {
		t.Errorf("--version: %d %q", code, out.String())
	}
	errs.Reset()
	if code := run(context.Background(), []string{"--master", "http://127.0.0.1:1", "--state-dir", t.TempDir(), "--hostname", "box", "--key", "k"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "reach the master") {
		t.Errorf("an unreachable master: %d %q", code, errs.String())
	}
}
