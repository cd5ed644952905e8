package launch

// IdleTimeouts exposes idleTimeouts to the package's tests.
var IdleTimeouts = idleTimeouts
