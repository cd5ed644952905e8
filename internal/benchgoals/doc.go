// Package benchgoals runs the benchmarks that carry the project's speed
// and memory goals and says, for each figure, whether its goal is met:
// what `make bench` prints before a stop that touches a measured path.
//
// A Goal names what it measures and how (a Go benchmark, whose metrics
// are read from `go test -bench` output, or a program such as joinload
// driving the server binary), and each of its Figures names the goal it
// is held to. Goals that need root, the test control plane or the Ray
// environment say so; the short subset (Short) leaves out the slowest.
// Tests never assert time: the goals live here.
package benchgoals
