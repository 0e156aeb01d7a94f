package node

import "runtime/debug"

// Version is the broker's release version. Release builds set it with
// -ldflags "-X github.com/faultline/faultline/broker/node.Version=...".
var Version = "0.1.0-dev"

// VersionString returns Version followed by the VCS revision the binary was
// built from, when the Go toolchain recorded one.
func VersionString() string {
	v := Version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return v + " (commit " + s.Value[:12] + ")"
		}
	}
	return v
}
