package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/faultline/faultline/nemesis"
)

// FileSchedule is the run directory's record of the fault events the run
// executed (a JSON list of nemesis.Event), written when the workload phase
// ends.
const FileSchedule = "schedule.json"

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
// test's --nemesis list, whose slots its events name).
func ReadSchedule(path string) ([]nemesis.Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var events []nemesis.Event
	if err := json.Unmarshal(b, &events); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if events == nil {
		events = []nemesis.Event{}
	}
	return events, nil
}

// LoadReplay reads a stored run for an exact replay: path is the run's
// directory or its test.json. The test is the stored one with the seed it
// ran with; its schedule is the run's schedule.json (the events it
// executed, on their targets and times) when there is one. exact is false
// for a run stored before schedules were recorded: the replay then draws
// the schedule from the seed again.
func LoadReplay(path string) (t Test, exact bool, err error) {
	dir, specPath := path, filepath.Join(path, "test.json")
	if st, serr := os.Stat(path); serr == nil && !st.IsDir() {
		dir, specPath = filepath.Dir(path), path
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		return Test{}, false, err
	}
	t = DefaultTest()
	if err := json.Unmarshal(b, &t); err != nil {
		return Test{}, false, fmt.Errorf("%s: %w", specPath, err)
	}
	events, err := ReadSchedule(filepath.Join(dir, FileSchedule))
	switch {
	case err == nil:
		if err := nemesis.ValidateEvents(t.Nemesis, events); err != nil {
			return Test{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, FileSchedule), err)
		}
		t.Schedule = events
		return t, true, nil
	case errors.Is(err, fs.ErrNotExist):
		if t.Schedule != nil {
			return t, true, nil
		}
		return t, false, nil
	}
	return Test{}, false, err
}
