package nemesis

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Kind names a kind of fault in a --nemesis list.
type Kind string

// The kinds of fault.
const (
	KindNone      Kind = "none"
	KindKill      Kind = "kill"
	KindPause     Kind = "pause"
	KindPartition Kind = "partition"
	KindPower     Kind = "power"
	KindDiskError Kind = "disk-error"
	KindDiskFull  Kind = "disk-full"
	KindDiskSlow  Kind = "disk-slow"
	KindCorrupt   Kind = "corrupt"
	// KindStop is a controlled shutdown (SIGTERM), restarted when it stops.
	KindStop Kind = "stop"
	// KindRollingRestart restarts every node, one by one, each back in
	// the ISR before the next goes down.
	KindRollingRestart Kind = "rolling-restart"
	// KindMembership takes one node out of the cluster until the others
	// see it gone (out of every ISR) and brings it back when it stops.
	KindMembership Kind = "membership"
	// KindLaggingFailover cuts or slows a follower until it leaves the
	// ISR, then kills the leader: the failover must not land on it.
	KindLaggingFailover Kind = "lagging-failover"
	// KindPacket is a netem packet fault on the targets' interfaces.
	KindPacket Kind = "packet"
)

// kinds lists every kind, in the order error messages name them.
var kinds = []Kind{KindNone, KindKill, KindPause, KindPartition, KindPower, KindDiskError, KindDiskFull, KindDiskSlow, KindCorrupt,
	KindStop, KindRollingRestart, KindMembership, KindLaggingFailover, KindPacket}

// OnFaultFS reports whether the kind needs the fault filesystem under the
// nodes (and so CAP_SYS_ADMIN and /dev/fuse in them).
func (k Kind) OnFaultFS() bool {
	return k == KindPower || k == KindDiskError || k == KindDiskFull || k == KindDiskSlow
}

// NeedsNetAdmin reports whether the kind acts on the nodes' network (and
// so needs CAP_NET_ADMIN in them).
func (k Kind) NeedsNetAdmin() bool {
	return k == KindPartition || k == KindPacket || k == KindLaggingFailover
}

// FaultSpec is one entry of a --nemesis list: a kind of fault and, when
// given, the one mode it is pinned to (kill:leaders); without a mode the
// fault picks one at random each time it starts. With holds the faults
// composed with it (partition:one+kill:leaders): in one round they start
// after it, one after another, all in force together, and stop in the
// reverse order.
type FaultSpec struct {
	Kind Kind
	Mode string
	With []FaultSpec
}

// String writes the entry as --nemesis takes it: "kill", "kill:leaders"
// or "partition+kill:leaders".
func (f FaultSpec) String() string {
	s := string(f.Kind)
	if f.Mode != "" {
		s += ":" + f.Mode
	}
	for _, w := range f.With {
		s += "+" + w.String()
	}
	return s
}

// Parts returns the faults of the entry in the order they start: the
// entry itself and then those composed with it.
func (f FaultSpec) Parts() []FaultSpec {
	head := f
	head.With = nil
	out := []FaultSpec{head}
	for _, w := range f.With {
		out = append(out, w.Parts()...)
	}
	return out
}

// modes returns the modes a kind may be pinned to.
func (k Kind) modes() []string {
	switch k {
	case KindPower:
		return append(append([]string(nil), explicitProcessTargetModes...), PowerThenLeader, PowerAfterFsyncError, PowerAfterSlowFsync, PowerRestartLaggingThenLeader)
	case KindCorrupt:
		return append(append([]string(nil), explicitProcessTargetModes...), CorruptBitFlip, CorruptBitFlipThenLeader, CorruptUnreplicatedTail, CorruptDiskReplaced)
	case KindKill, KindPause, KindDiskError, KindDiskFull, KindDiskSlow:
		return explicitProcessTargetModes
	case KindPartition:
		return append(append([]string(nil), PartitionModes...), PartitionLaggingThenLeader, PartitionLeaderAndFollower, PartitionDeposedLeaderReturns, PartitionLeaderCutThenKilled, PartitionCoordinator, PartitionClientsCoordinator, PartitionCoordinatorCutThenKilled)
	case KindStop:
		return explicitProcessTargetModes
	case KindLaggingFailover:
		return LaggingModes
	case KindPacket:
		return PacketModes
	}
	return nil
}

// validate checks one entry against the grammar; the error names the entry.
func (f FaultSpec) validate() error {
	if len(f.With) > 0 {
		seen := map[Kind]bool{}
		for _, p := range f.Parts() {
			if p.Kind == KindNone {
				return fmt.Errorf("%s: none cannot be composed with other faults", f)
			}
			if seen[p.Kind] {
				return fmt.Errorf("%s: %s composed with itself (a fault of a kind is in force once at a time)", f, p.Kind)
			}
			seen[p.Kind] = true
			if err := p.validate(); err != nil {
				return err
			}
		}
		return nil
	}
	if !slices.Contains(kinds, f.Kind) {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = string(k)
		}
		return fmt.Errorf("unknown nemesis %q (known: %s)", f.Kind, strings.Join(names, ", "))
	}
	if f.Mode == "" {
		return nil
	}
	known := f.Kind.modes()
	if len(known) == 0 {
		return fmt.Errorf("%s: takes no mode, got %q", f.Kind, f.Mode)
	}
	if !slices.Contains(known, f.Mode) {
		return fmt.Errorf("%s: unknown mode %q (known: %s)", f.Kind, f.Mode, strings.Join(known, ", "))
	}
	return nil
}

// Spec is a parsed --nemesis list: the faults a test's schedule chooses
// from. It is parsed once (ParseSpec, or from test.json) and used as typed
// values by the schedule, the harness and the report.
type Spec []FaultSpec

// ParseSpec reads a comma-separated --nemesis list: entries KIND or
// KIND:MODE, with kinds none, kill, pause, partition, power, disk-error,
// disk-full, disk-slow, corrupt, stop, rolling-restart, membership,
// lagging-failover, packet; the process kinds take the modes one,
// minority, majority, leaders, controller, all; power also takes
// follower-then-leader, after-fsync-error, after-slow-fsync and
// restart-lagging-then-leader, corrupt also bit-flip,
// bit-flip-then-leader, unreplicated-tail and disk-replaced; partition takes one, halves, majorities-ring,
// controller and lagging-then-leader; lagging-failover takes cut, slow;
// packet takes delay, loss, duplicate, reorder; none, rolling-restart and
// membership take none. An entry may compose faults of different kinds
// with "+" (partition:one+kill:leaders): they are in force together. The
// error names the entry that is wrong.
func ParseSpec(list string) (Spec, error) {
	var s Spec
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("empty entry in %q (name a fault between every two commas; none for no faults)", list)
		}
		var f FaultSpec
		for i, part := range strings.Split(entry, "+") {
			part = strings.TrimSpace(part)
			if part == "" {
				return nil, fmt.Errorf("empty fault in %q (name a fault on each side of every +)", entry)
			}
			kind, mode, hasMode := strings.Cut(part, ":")
			if hasMode && mode == "" {
				return nil, fmt.Errorf("%s: empty mode in %q", kind, part)
			}
			p := FaultSpec{Kind: Kind(kind), Mode: mode}
			if err := p.validate(); err != nil {
				return nil, err
			}
			if i == 0 {
				f = p
			} else {
				f.With = append(f.With, p)
			}
		}
		if err := f.validate(); err != nil {
			return nil, err
		}
		s = append(s, f)
	}
	return s, nil
}

// Validate checks a Spec built in code against the grammar ParseSpec reads.
func (s Spec) Validate() error {
	if len(s) == 0 {
		return errors.New("name at least one fault (none for no faults)")
	}
	for _, f := range s {
		if err := f.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Names returns each entry as --nemesis takes it.
func (s Spec) Names() []string {
	out := make([]string, len(s))
	for i, f := range s {
		out[i] = f.String()
	}
	return out
}

// String writes the list as --nemesis takes it: "kill,partition:one".
func (s Spec) String() string { return strings.Join(s.Names(), ",") }

// Parts returns every fault of the list, composed ones included, in
// order: the slots a schedule's events name by index.
func (s Spec) Parts() []FaultSpec {
	var out []FaultSpec
	for _, f := range s {
		out = append(out, f.Parts()...)
	}
	return out
}

// Has reports whether the list names a fault of kind k (composed ones
// included).
func (s Spec) Has(k Kind) bool {
	return slices.ContainsFunc(s.Parts(), func(f FaultSpec) bool { return f.Kind == k })
}

// NeedsNetAdmin reports whether any fault acts on the nodes' network
// (partition, packet, lagging-failover, power:restart-lagging-then-leader,
// corrupt:unreplicated-tail), which needs the nodes' netfilter rules.
func (s Spec) NeedsNetAdmin() bool {
	return slices.ContainsFunc(s.Parts(), func(f FaultSpec) bool {
		return f.Kind.NeedsNetAdmin() || (f.Kind == KindPower && f.Mode == PowerRestartLaggingThenLeader) ||
			(f.Kind == KindCorrupt && f.Mode == CorruptUnreplicatedTail)
	})
}

// Injected returns the entries that inject a fault (all but none).
func (s Spec) Injected() Spec {
	return slices.DeleteFunc(slices.Clone(s), func(f FaultSpec) bool { return f.Kind == KindNone })
}

// OnFaultFS reports whether any entry needs the fault filesystem.
func (s Spec) OnFaultFS() bool {
	return slices.ContainsFunc(s.Parts(), func(f FaultSpec) bool { return f.Kind.OnFaultFS() })
}

// Faults builds one fault for each of the list's Parts (the slots a
// schedule's events name), made real by rt and aimed with c. The disk
// faults need rt to be a Disk as well, and the packet faults a Network;
// without it they fail when they start.
func (s Spec) Faults(rt Runtime, c Cluster) []Fault {
	disk, _ := rt.(Disk)
	network, _ := rt.(Network)
	parts := s.Parts()
	faults := make([]Fault, 0, len(parts))
	for _, f := range parts {
		var modes []string
		if f.Mode != "" {
			modes = []string{f.Mode}
		}
		switch f.Kind {
		case KindKill:
			faults = append(faults, &Kill{Runtime: rt, Cluster: c, Modes: modes})
		case KindPause:
			faults = append(faults, &Pause{Runtime: rt, Cluster: c, Modes: modes})
		case KindPartition:
			faults = append(faults, &Partition{Runtime: rt, Cluster: c, Modes: modes})
		case KindPower:
			faults = append(faults, &Power{Runtime: rt, Disk: disk, Cluster: c, Modes: modes})
		case KindDiskError, KindDiskFull, KindDiskSlow:
			faults = append(faults, &DiskFault{Kind: f.Kind, Disk: disk, Cluster: c, Modes: modes})
		case KindCorrupt:
			faults = append(faults, &Corrupt{Runtime: rt, Disk: disk, Cluster: c, Modes: modes})
		case KindStop:
			faults = append(faults, &Stop{Runtime: rt, Cluster: c, Modes: modes})
		case KindRollingRestart:
			faults = append(faults, &RollingRestart{Runtime: rt, Cluster: c})
		case KindMembership:
			faults = append(faults, &Membership{Runtime: rt, Cluster: c})
		case KindLaggingFailover:
			faults = append(faults, &LaggingFailover{Runtime: rt, Network: network, Cluster: c, Modes: modes})
		case KindPacket:
			faults = append(faults, &Packet{Network: network, Cluster: c, Modes: modes})
		default:
			faults = append(faults, Noop{})
		}
	}
	return faults
}

// MarshalJSON writes the list as test.json holds it: ["kill","partition:one"].
func (s Spec) MarshalJSON() ([]byte, error) { return json.Marshal(s.Names()) }

// UnmarshalJSON reads a list of entries or one comma-separated string,
// with ParseSpec's grammar; null leaves s as it is.
func (s *Spec) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var list string
	var entries []string
	if err := json.Unmarshal(b, &entries); err == nil {
		list = strings.Join(entries, ",")
	} else if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("nemesis: want a list of faults or a comma-separated string, got %s", b)
	}
	parsed, err := ParseSpec(list)
	if err != nil {
		return fmt.Errorf("nemesis: %w", err)
	}
	*s = parsed
	return nil
}
