package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreviousBrokerEpochNeedsEveryDirClean: a restart is clean (it offers
// its last broker epoch) only when every log dir holds a marker naming the
// same epoch; one dir that crashed makes the whole broker unclean.
func TestPreviousBrokerEpochNeedsEveryDirClean(t *testing.T) {
	marker := func(epoch string) string { return `{"version":0,"brokerEpoch":` + epoch + `}` }
	cases := []struct {
		name    string
		markers []string // per dir, "" for no marker
		want    int64
	}{
		{"one clean dir", []string{marker("7")}, 7},
		{"every dir clean at one epoch", []string{marker("7"), marker("7")}, 7},
		{"first dir clean, second crashed", []string{marker("7"), ""}, -1},
		{"first dir crashed, second clean", []string{"", marker("7")}, -1},
		{"dirs at different epochs", []string{marker("7"), marker("9")}, -1},
		{"an unreadable marker", []string{marker("7"), "{garbage"}, -1},
		{"no marker", []string{""}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			var dirs []string
			for i, m := range c.markers {
				dir := filepath.Join(root, string(rune('a'+i)))
				require.NoError(t, os.MkdirAll(dir, 0o755))
				if m != "" {
					require.NoError(t, os.WriteFile(filepath.Join(dir, CleanShutdownFile), []byte(m), 0o644))
				}
				dirs = append(dirs, dir)
			}
			assert.Equal(t, c.want, PreviousBrokerEpoch(OS, dirs))
		})
	}
}
