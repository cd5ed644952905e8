// Package browsertest drives Debian's headless Chromium from tests
// (chromedp): a browser that asks nothing of the internet, whose every
// request and every error the page logs are recorded for the test to
// check.
package browsertest
