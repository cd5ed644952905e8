package kubestore

import "time"

// SetSettleTimes shortens how long a create whose outcome is unknown is
// waited for, and how often it is read; the returned function restores
// them.
func SetSettleTimes(create, every time.Duration) (restore func()) {
	oldCreate, oldEvery := settleCreate, settleEvery
	settleCreate, settleEvery = create, every
	return func() { settleCreate, settleEvery = oldCreate, oldEvery }
}
