package replica

import "time"

// How long the tests of this package (in-package and replica_test) wait
// for a condition, and how often they look.
const (
	WaitFor = 10 * time.Second
	Tick    = 5 * time.Millisecond

	waitFor = WaitFor
	tick    = Tick
)

// Helpers shared with the replica_test package, whose in-process cluster
// runs a real server (which imports replica) in front of every Manager.
var (
	SettingsFromConfigs = settingsFromConfigs
	Batch               = batch
	Counter             = counter
	Gauge               = gauge
)
