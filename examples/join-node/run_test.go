package main

import (
	"bytes"
	"context"
	"os"
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
	t.Setenv("GRIDWEAVE_JOIN_KEY", "k")
	if code := run(context.Background(), []string{"--master", "http://127.0.0.1:1", "--state-dir", t.TempDir(), "--hostname", "box"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "reach the master") {
		t.Errorf("an unreachable master: %d %q", code, errs.String())
	}
	if _, set := os.LookupEnv("GRIDWEAVE_JOIN_KEY"); set {
		t.Error("the agent left the join key in its environment, where its children inherit it")
	}
	errs.Reset()
	if code := run(context.Background(), []string{"--master", "http://127.0.0.1:1", "--pin", "sha256//" + strings.Repeat("A", 43) + "=", "--state-dir", t.TempDir(), "--hostname", "box"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "https") {
		t.Errorf("a pin with a plain-HTTP master: %d %q", code, errs.String())
	}
	for _, bad := range [][]string{{"--direct-links", "some"}, {"--idle-after", "-1m"}, {"--idle-after", "0s"}} {
		errs.Reset()
		args := append([]string{"--master", "http://127.0.0.1:1", "--state-dir", t.TempDir(), "--hostname", "box", "--serve"}, bad...)
		if code := run(context.Background(), args, &out, &errs); code != 2 || !strings.Contains(errs.String(), bad[0]) {
			t.Errorf("%v: %d %q, want 2 naming the flag", bad, code, errs.String())
		}
	}
}
