package gridweave

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gridweave.dev/internal/browsertest"
)

// docsScreenshot is where TestDocsInBrowser keeps its screenshot
// (testdata/artifacts is ignored by git).
const docsScreenshot = "testdata/artifacts/docs.png"

// TestDocsInBrowser loads /docs in headless Chromium, waits until Swagger
// UI has drawn the document, and checks that every route of the table is
// listed, that "Try it out" reaches the service, and that the page asks
// nothing of another host and logs no error. It keeps a screenshot.
func TestDocsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	s, srv := newDocsTestServer(t)
	browser := browsertest.Start(t, 1280, 1000)
	ctx := browser.Ctx

	step, cancelStep := context.WithTimeout(ctx, 60*time.Second)
	defer cancelStep()
	if err := chromedp.Do(step,
		chromedp.Navigate(srv.URL+"/docs"),
		// Swagger UI has drawn the document once the operations are there.
		chromedp.WaitVisible(chromedp.CSS(".swagger-ui .opblock .opblock-summary-path")),
	); err != nil {
		t.Fatalf("load /docs: %v", err)
	}

	// Every operation of the route table is listed, and nothing else.
	listed, err := chromedp.Run(step, chromedp.Evaluate[[]string](`
		Array.from(document.querySelectorAll(".swagger-ui .opblock")).map(b => {
			const m = b.querySelector(".opblock-summary-method");
			const p = b.querySelector(".opblock-summary-path");
			const path = p && (p.getAttribute("data-path") || p.textContent.replace(/\u200b/g, "").trim());
			const shown = b.getBoundingClientRect().height > 0;
			return (m ? m.textContent.trim() : "?") + " " + path + (shown ? "" : " (hidden)");
		})`))
	if err != nil {
		t.Fatalf("read the operations: %v", err)
	}
	slices.Sort(listed)
	registered := registeredRoutes(s)
	slices.Sort(registered)
	missing, extra := diffRoutes(registered, listed)
	for _, r := range missing {
		t.Errorf("/docs does not list %s", r)
	}
	for _, r := range extra {
		t.Errorf("/docs lists %q, which is not a registered route", r)
	}
	t.Logf("/docs lists %d operations", len(listed))

	// Try it out: GET /healthz from the page answers 200.
	const healthz = "#operations-service-healthz"
	if err := chromedp.Do(step,
		chromedp.Click(chromedp.CSS(healthz+" .opblock-summary-control")),
		chromedp.WaitVisible(chromedp.CSS(healthz+" .try-out__btn")),
		chromedp.Click(chromedp.CSS(healthz+" .try-out__btn")),
		chromedp.WaitVisible(chromedp.CSS(healthz+" .btn.execute")),
		chromedp.Click(chromedp.CSS(healthz+" .btn.execute")),
		chromedp.WaitVisible(chromedp.CSS(healthz+" .live-responses-table tbody .response-col_status")),
	); err != nil {
		t.Fatalf("try GET /healthz from the page: %v", err)
	}
	status, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(healthz+" .live-responses-table tbody .response-col_status")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(status) != "200" {
		t.Errorf("Try it out on GET /healthz shows status %q, want 200", status)
	}

	// The request body of validate shows the documented examples.
	const validate = "#operations-nodes-validateNode"
	if err := chromedp.Do(step,
		chromedp.Click(chromedp.CSS(validate+" .opblock-summary-control")),
		chromedp.WaitVisible(chromedp.CSS(validate+" .opblock-section-request-body .body-param__example")),
	); err != nil {
		t.Fatalf("open POST /v1/nodes/validate: %v", err)
	}
	example, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(validate+" .opblock-section-request-body .body-param__example")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(example, `"hostname": "gpu-node-1"`) {
		t.Errorf("the request body example of validate is %q, want the documented hostname", example)
	}

	png, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(docsScreenshot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(docsScreenshot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(docsScreenshot)
	t.Logf("screenshot of /docs: %s", abs)

	browser.CheckOnlyOrigin(t, srv.URL)
}
