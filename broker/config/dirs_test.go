package config

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckDirsCreatesAndWrites(t *testing.T) {
	root := t.TempDir()
	a, b, meta := filepath.Join(root, "a"), filepath.Join(root, "b", "nested"), filepath.Join(root, "meta")
	c, _ := mustFromMap(t, with(combined(), map[string]string{"log.dirs": a + "," + b, "metadata.log.dir": meta}))
	require.NoError(t, c.CheckDirs())
	for _, d := range []string{a, b, meta} {
		entries, err := os.ReadDir(d)
		require.NoError(t, err, "CheckDirs creates %s", d)
		assert.Empty(t, entries, "the probe file is removed from %s", d)
	}
}

// unwritableDir returns a directory path this process cannot write to: a
// child of a read-only directory, or, when running as root (which writes
// anyway), a path under a regular file, which fails for root too.
func unwritableDir(t *testing.T) string {
	root := t.TempDir()
	readOnly := filepath.Join(root, "ro")
	require.NoError(t, os.Mkdir(readOnly, 0o500))
	t.Cleanup(func() { _ = os.Chmod(readOnly, 0o700) })
	probe := filepath.Join(readOnly, "probe")
	if err := os.Mkdir(probe, 0o700); err != nil {
		return filepath.Join(readOnly, "data")
	}
	require.NoError(t, os.Remove(probe))
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	return filepath.Join(file, "data")
}

func TestCheckDirsReportsEveryUnwritableDir(t *testing.T) {
	good := t.TempDir()
	bad := unwritableDir(t)
	c, _ := mustFromMap(t, with(combined(), map[string]string{"log.dirs": good + "," + bad}))
	err := c.CheckDirs()
	require.Error(t, err)
	problems := Problems(err)
	require.Len(t, problems, 1)
	assert.Regexp(t, `^log\.dirs: data directory `+regexp.QuoteMeta(bad)+` is not writable \(.+\); create it and give this user write access, or choose another directory$`, problems[0])

	c, _ = mustFromMap(t, with(combined(), map[string]string{"log.dirs": "-", "log.dir": bad, "metadata.log.dir": bad + "-meta"}))
	problems = Problems(c.CheckDirs())
	require.Len(t, problems, 2)
	assert.Regexp(t, `^log\.dir: data directory `, problems[0])
	assert.Regexp(t, `^metadata\.log\.dir: data directory `, problems[1])
}
