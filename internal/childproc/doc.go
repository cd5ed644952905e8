// Package childproc starts the long-lived helper processes of tests (a
// server under test, Prometheus) so that they die with the test process,
// even when the test's goroutines enter network namespaces.
package childproc
