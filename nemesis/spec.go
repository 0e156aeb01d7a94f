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
)

// kinds lists every kind, in the order error messages name them.
var kinds = []Kind{KindNone, KindKill, KindPause, KindPartition, KindPower, KindDiskError, KindDiskFull, KindDiskSlow, KindCorrupt}

// OnFaultFS reports whether the kind needs the fault filesystem under the
// nodes (and so CAP_SYS_ADMIN and /dev/fuse in them).
func (k Kind) OnFaultFS() bool {
	return k == KindPower || k == KindDiskError || k == KindDiskFull || k == KindDiskSlow
}

// FaultSpec is one entry of a --nemesis list: a kind of fault and, when
// given, the one mode it is pinned to (kill:leaders); without a mode the
// fault picks one at random each time it starts.
type FaultSpec struct {
	Kind Kind
	Mode string
}

// String writes the entry as --nemesis takes it: "kill" or "kill:leaders".
func (f FaultSpec) String() string {
	if f.Mode == "" {
		return string(f.Kind)
	}
	return string(f.Kind) + ":" + f.Mode
}

// modes returns the modes a kind may be pinned to.
func (k Kind) modes() []string {
	switch k {
	case KindPower:
		return append(append([]string(nil), explicitProcessTargetModes...), PowerThenLeader, PowerAfterFsyncError, PowerAfterSlowFsync, PowerRestartLaggingThenLeader)
	case KindCorrupt:
		return append(append([]string(nil), explicitProcessTargetModes...), CorruptBitFlip, CorruptBitFlipThenLeader)
	case KindKill, KindPause, KindDiskError, KindDiskFull, KindDiskSlow:
		return explicitProcessTargetModes
	case KindPartition:
		return append(append([]string(nil), PartitionModes...), PartitionLaggingThenLeader)
	}
	return nil
}

// validate checks one entry against the grammar; the error names the entry.
func (f FaultSpec) validate() error {
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
// disk-full, disk-slow, corrupt; all but partition and none take the modes
// one, minority, majority, leaders, controller, all; power also takes
// follower-then-leader, after-fsync-error, after-slow-fsync and
// restart-lagging-then-leader,
// corrupt also bit-flip and bit-flip-then-leader;
// partition takes one, halves, majorities-ring, controller and
// lagging-then-leader; none takes none. The error names the entry that is
// wrong.
func ParseSpec(list string) (Spec, error) {
	var s Spec
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty entry in %q (name a fault between every two commas; none for no faults)", list)
		}
		kind, mode, hasMode := strings.Cut(part, ":")
		if hasMode && mode == "" {
			return nil, fmt.Errorf("%s: empty mode in %q", kind, part)
		}
		f := FaultSpec{Kind: Kind(kind), Mode: mode}
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

// Has reports whether the list names a fault of kind k.
func (s Spec) Has(k Kind) bool {
	return slices.ContainsFunc(s, func(f FaultSpec) bool { return f.Kind == k })
}

// Injected returns the entries that inject a fault (all but none).
func (s Spec) Injected() Spec {
	return slices.DeleteFunc(slices.Clone(s), func(f FaultSpec) bool { return f.Kind == KindNone })
}

// CutsNetwork reports whether any entry cuts the network between nodes
// (partition, or power:restart-lagging-then-leader), which needs the
// nodes' netfilter rules.
func (s Spec) CutsNetwork() bool {
	return slices.ContainsFunc(s, func(f FaultSpec) bool {
		return f.Kind == KindPartition || (f.Kind == KindPower && f.Mode == PowerRestartLaggingThenLeader)
	})
}

// OnFaultFS reports whether any entry needs the fault filesystem.
func (s Spec) OnFaultFS() bool {
	return slices.ContainsFunc(s, func(f FaultSpec) bool { return f.Kind.OnFaultFS() })
}

// Faults builds the faults of the list, made real by rt and aimed with c.
// The disk faults need rt to be a Disk as well; without it they fail when
// they start.
func (s Spec) Faults(rt Runtime, c Cluster) []Fault {
	disk, _ := rt.(Disk)
	faults := make([]Fault, 0, len(s))
	for _, f := range s {
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
