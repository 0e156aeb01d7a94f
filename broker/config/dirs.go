package config

import (
	"fmt"
	"os"
)

// CheckDirs makes sure every data directory (log.dirs and metadata.log.dir)
// exists or can be created, and takes a write: it creates each directory,
// writes and syncs a small temporary file in it, and removes the file. The
// error, an *Error, names every directory that fails, one per line.
func (c *Config) CheckDirs() error {
	var problems []string
	check := func(key, dir string) {
		if err := checkWritable(dir); err != nil {
			problems = append(problems, fmt.Sprintf("%s: data directory %s is not writable (%v); create it and give this user write access, or choose another directory", key, dir, err))
		}
	}
	for _, d := range c.LogDirs {
		check(c.logDirsKey, d)
	}
	if c.MetadataLogDir != "" && !contains(c.LogDirs, c.MetadataLogDir) {
		check("metadata.log.dir", c.MetadataLogDir)
	}
	return asError(problems)
}

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".faultline-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, werr := f.Write([]byte("ok\n"))
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	rerr := os.Remove(name)
	for _, err := range []error{werr, cerr, rerr} {
		if err != nil {
			return err
		}
	}
	return nil
}
