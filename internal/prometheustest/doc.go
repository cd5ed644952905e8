// Package prometheustest runs a real Prometheus (Debian's package) for a
// test, with file_sd_configs on a directory of scrape targets, and reads
// back the targets it discovered. It never lets Prometheus scrape.
package prometheustest
