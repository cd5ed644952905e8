package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"gridweave.dev/internal/browsertest"
)

// TestREADMEWalkthrough runs the README's curl walk of the join flow, as
// written, against this binary's wiring in dev mode, so it cannot rot.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s (.ci/run installs it): %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- walkthrough: [^>]*-->\n```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no walkthrough block")
	}
	s := start(t, map[string]string{"KUBERAY_DB": t.TempDir() + "/kuberay.db", "WG_INTERFACE": "none"}, "--dev")
	token := regexp.MustCompile(`admin token of this run is ([0-9a-f]+)`).FindStringSubmatch(s.stdout.String())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", string(block[1]))
	cmd.Env = append(os.Environ(), "BASE="+s.url, "ADMIN_TOKEN="+token[1])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s\nserver log:\n%s", err, out, s.stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{`"gpu-nvidia-nvidia-h100-80gb-hbm3-x1"`, "gpu-box-1 10.100.0.2 registered", `gridweave-cluster ["gpu-nvidia-nvidia-h100-80gb-hbm3-x1"]`, "true"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the walkthrough printed\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}

// TestConsoleListsTheWalkthroughsNode: `make run`'s server, the README's
// walkthrough without its last (disconnect) line, then the console at
// /ui/ with the printed token: the fleet page lists the node.
func TestConsoleListsTheWalkthroughsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- walkthrough: [^>]*-->\n```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no walkthrough block")
	}
	lines := strings.Split(strings.TrimSpace(string(block[1])), "\n")
	if !strings.Contains(lines[len(lines)-1], "/v1/nodes/disconnect") {
		t.Fatalf("the walkthrough's last line is not the disconnect: %s", lines[len(lines)-1])
	}
	s := start(t, map[string]string{"KUBERAY_DB": t.TempDir() + "/kuberay.db", "WG_INTERFACE": "none"}, "--dev")
	token := regexp.MustCompile(`admin token of this run is ([0-9a-f]+)`).FindStringSubmatch(s.stdout.String())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(lines[:len(lines)-1], "\n"))
	cmd.Env = append(os.Environ(), "BASE="+s.url, "ADMIN_TOKEN="+token[1])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out)
	}

	b := browsertest.Start(t, 1400, 900)
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token[1]+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-hostname="gpu-box-1"]`)),
	); err != nil {
		t.Fatalf("the console's fleet page: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-hostname="gpu-box-1"]`)))
	if err != nil || !strings.Contains(row, "NVIDIA H100 80GB HBM3 × 1") || !strings.Contains(row, "registered") {
		t.Errorf("the fleet's row of gpu-box-1: %q (%v)", row, err)
	}
	b.CheckOnlyOrigin(t, s.url)
}
