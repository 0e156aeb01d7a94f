package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/reports"
)

// FileSchedule is the run directory's record of the fault events the run
// executed (a JSON list of nemesis.Event), written when the workload phase
// ends.
const FileSchedule = reports.FileSchedule

// writeSchedule writes the events the run executed into its directory.
func writeSchedule(dir string, events []nemesis.Event) error {
	return writeScheduleTo(filepath.Join(dir, FileSchedule), events)
}

// writeScheduleTo writes events as a schedule.json at path.
func writeScheduleTo(path string, events []nemesis.Event) error {
	if events == nil {
		events = []nemesis.Event{}
	}
	b, err := json.MarshalIndent(events, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadSchedule reads a schedule.json (Test.Validate checks it against the
// test's --nemesis list, whose slots its events name). A schedule.json in
// the older format (before events named slots) is refused with a pointer
// to --replay, which reads it against its run's test.json.
func ReadSchedule(path string) ([]nemesis.Event, error) {
	events, _, err := readScheduleFor(path, nil)
	return events, err
}

// readScheduleFor reads a schedule.json; one in the older format is
// converted against spec (nil: refused), with a warning saying what the
// conversion could not keep.
func readScheduleFor(path string, spec nemesis.Spec) ([]nemesis.Event, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var events []nemesis.Event
	if err := json.Unmarshal(b, &events); err != nil {
		var legacy []legacyEvent
		if json.Unmarshal(b, &legacy) != nil || len(legacy) == 0 || legacy[0].Op == "" {
			return nil, "", fmt.Errorf("%s: %w", path, err)
		}
		if spec == nil {
			return nil, "", fmt.Errorf("%s is in the older schedule format (events by id, not by slot): replay its run with --replay, which reads it against the run's test.json", path)
		}
		events, err = fromLegacy(spec, legacy)
		if err != nil {
			return nil, "", fmt.Errorf("%s (older schedule format): %w", path, err)
		}
		return events, fmt.Sprintf("%s is in the older schedule format: its events were matched to the --nemesis slots by kind and mode and keep their times, modes and nodes; the faults' own draws (power-loss variant, corruption seed) are drawn again", path), nil
	}
	if events == nil {
		events = []nemesis.Event{}
	}
	return events, "", nil
}

// legacyEvent is a schedule.json event as runs wrote it before events
// named slots: the time as a duration string, start or stop of a fault by
// a running id, its targets.
type legacyEvent struct {
	At      string       `json:"at"`
	Op      string       `json:"op"`
	ID      int          `json:"id"`
	Kind    nemesis.Kind `json:"kind"`
	Mode    string       `json:"mode"`
	Targets []string     `json:"targets"`
}

// fromLegacy converts older events: each start goes to the first slot of
// spec with its kind (and its mode, when the slot names one) not in
// force, each stop to its start's slot.
func fromLegacy(spec nemesis.Spec, legacy []legacyEvent) ([]nemesis.Event, error) {
	parts := spec.Parts()
	slotOf, inForce := map[int]int{}, map[int]bool{}
	out := make([]nemesis.Event, 0, len(legacy))
	for i, l := range legacy {
		at, err := time.ParseDuration(l.At)
		if err != nil {
			return nil, fmt.Errorf("event %d: at: %w", i, err)
		}
		switch l.Op {
		case string(nemesis.ActionStart):
			slot := -1
			for j, p := range parts {
				if p.Kind == l.Kind && (p.Mode == "" || p.Mode == l.Mode) && !inForce[j] {
					slot = j
					break
				}
			}
			if slot < 0 {
				return nil, fmt.Errorf("event %d: no free slot of --nemesis %s for a %s:%s fault", i, spec, l.Kind, l.Mode)
			}
			slotOf[l.ID], inForce[slot] = slot, true
			out = append(out, nemesis.Event{At: at, Action: nemesis.ActionStart, Slot: slot, Kind: l.Kind, Mode: l.Mode, Nodes: l.Targets})
		case string(nemesis.ActionStop):
			slot, ok := slotOf[l.ID]
			if !ok {
				return nil, fmt.Errorf("event %d: stop of fault %d, which never started", i, l.ID)
			}
			delete(slotOf, l.ID)
			inForce[slot] = false
			out = append(out, nemesis.Event{At: at, Action: nemesis.ActionStop, Slot: slot, Kind: l.Kind})
		default:
			return nil, fmt.Errorf("event %d: op must be start or stop, got %q", i, l.Op)
		}
	}
	return out, nil
}

// LoadReplay reads a stored run for an exact replay: path is the run's
// directory or its test.json. The test is the stored one with the seed it
// ran with; its schedule is the run's schedule.json (the events it
// executed, on their targets and times) when there is one. exact is false
// for a run stored before schedules were recorded: the replay then draws
// the schedule from the seed again. warning, when not empty, says the
// schedule was in the older format and what its conversion lost.
func LoadReplay(path string) (t Test, exact bool, warning string, err error) {
	dir, specPath := path, filepath.Join(path, "test.json")
	if st, serr := os.Stat(path); serr == nil && !st.IsDir() {
		dir, specPath = filepath.Dir(path), path
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		return Test{}, false, "", err
	}
	t = DefaultTest()
	if err := json.Unmarshal(b, &t); err != nil {
		return Test{}, false, "", fmt.Errorf("%s: %w", specPath, err)
	}
	events, warning, err := readScheduleFor(filepath.Join(dir, FileSchedule), t.Nemesis)
	switch {
	case err == nil:
		if err := nemesis.ValidateEvents(t.Nemesis, events); err != nil {
			return Test{}, false, "", fmt.Errorf("%s: %w", filepath.Join(dir, FileSchedule), err)
		}
		t.Schedule = events
		return t, true, warning, nil
	case errors.Is(err, fs.ErrNotExist):
		return t, t.Schedule != nil, "", nil
	}
	return Test{}, false, "", err
}
