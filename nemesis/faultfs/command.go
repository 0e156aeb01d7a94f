package faultfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// Ops is a set of operations a fault applies to.
type Ops int

const (
	// OpWrite is a write to a file.
	OpWrite Ops = 1 << iota
	// OpFsync is an fsync (or fdatasync) of a file.
	OpFsync
	// OpAll is both.
	OpAll = OpWrite | OpFsync
)

func (o Ops) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpFsync:
		return "fsync"
	default:
		return "all"
	}
}

// EIOFault fails the chosen operations with EIO.
type EIOFault struct {
	Ops Ops
	// Path is a glob (path.Match) on the path relative to the mount's
	// root; a glob without a slash matches the base name at any depth.
	// Empty matches every file.
	Path string
	// For is how long the fault lasts; 0 lasts until healed.
	For time.Duration
}

// NoSpaceFault fails writes with ENOSPC once they have grown the files by
// more than Bytes from now (0: the disk is full at once). A write that
// would pass the quota fails whole: nothing of it is written.
type NoSpaceFault struct {
	Bytes int64
}

// SlowFault delays the chosen operations by Delay plus a uniform jitter in
// [0, Jitter), drawn from Seed.
type SlowFault struct {
	Ops    Ops
	Delay  time.Duration
	Jitter time.Duration
	Seed   int64
	Path   string
	For    time.Duration
}

// Command is one line of the text command form an agent takes from
// `docker exec` (see the package comment for the grammar).
type Command struct {
	Verb    string // power, eio, enospc, slow, heal, status
	Power   PowerSpec
	EIO     EIOFault
	NoSpace NoSpaceFault
	Slow    SlowFault
}

// ParseCommand parses one command line.
func ParseCommand(line string) (Command, error) {
	words := strings.Fields(line)
	if len(words) == 0 {
		return Command{}, fmt.Errorf("empty command: want power, eio, enospc, slow, heal or status")
	}
	c := Command{Verb: words[0]}
	args := &argList{verb: c.Verb, words: words[1:], seen: map[string]bool{}}
	var err error
	switch c.Verb {
	case "power":
		err = args.each(func(w string) error {
			switch {
			case w == "torn" || w == "reorder":
				if err := args.once(w); err != nil {
					return err
				}
				c.Power.Torn = c.Power.Torn || w == "torn"
				c.Power.Reorder = c.Power.Reorder || w == "reorder"
				return nil
			case args.key(w, "block"):
				return args.positive(w, &c.Power.BlockBytes)
			case args.key(w, "seed"):
				return args.int(w, &c.Power.Seed)
			}
			return args.unknown(w, "torn, reorder, block=BYTES, seed=N")
		})
	case "eio":
		c.EIO.Ops = OpAll
		err = args.each(func(w string) error {
			switch {
			case args.opWord(w):
				return args.ops(w, &c.EIO.Ops)
			case args.key(w, "path"):
				return args.glob(w, &c.EIO.Path)
			case args.key(w, "for"):
				return args.duration(w, &c.EIO.For)
			}
			return args.unknown(w, "write|fsync|all, path=GLOB, for=DURATION")
		})
	case "enospc":
		err = args.each(func(w string) error {
			if args.key(w, "bytes") {
				return args.nonNegative(w, &c.NoSpace.Bytes)
			}
			return args.unknown(w, "bytes=N")
		})
	case "slow":
		c.Slow.Ops = OpAll
		delaySet := false
		err = args.each(func(w string) error {
			switch {
			case args.opWord(w):
				return args.ops(w, &c.Slow.Ops)
			case args.key(w, "jitter"):
				return args.duration(w, &c.Slow.Jitter)
			case args.key(w, "seed"):
				return args.int(w, &c.Slow.Seed)
			case args.key(w, "path"):
				return args.glob(w, &c.Slow.Path)
			case args.key(w, "for"):
				return args.duration(w, &c.Slow.For)
			case !strings.Contains(w, "=") && !delaySet:
				delaySet = true
				d, err := time.ParseDuration(w)
				if err != nil || d < 0 {
					return fmt.Errorf("slow: bad delay %q: want a duration such as 50ms", w)
				}
				c.Slow.Delay = d
				return nil
			}
			return args.unknown(w, "write|fsync|all, DELAY, jitter=DURATION, seed=N, path=GLOB, for=DURATION")
		})
		if err == nil && !delaySet {
			err = fmt.Errorf("slow: missing the delay, e.g. slow fsync 50ms")
		}
	case "heal", "status":
		if len(args.words) > 0 {
			err = fmt.Errorf("%s takes no arguments, got %q", c.Verb, strings.Join(args.words, " "))
		}
	default:
		err = fmt.Errorf("unknown command %q: want power, eio, enospc, slow, heal or status", c.Verb)
	}
	if err != nil {
		return Command{}, err
	}
	return c, nil
}

// String is the canonical text of c; ParseCommand(c.String()) gives c.
func (c Command) String() string {
	w := []string{c.Verb}
	switch c.Verb {
	case "power":
		if c.Power.Torn {
			w = append(w, "torn")
		}
		if c.Power.Reorder {
			w = append(w, "reorder")
		}
		if c.Power.BlockBytes != 0 {
			w = append(w, fmt.Sprintf("block=%d", c.Power.BlockBytes))
		}
		if c.Power.Seed != 0 {
			w = append(w, fmt.Sprintf("seed=%d", c.Power.Seed))
		}
	case "eio":
		w = append(w, c.EIO.Ops.String())
		w = appendScope(w, c.EIO.Path, c.EIO.For)
	case "enospc":
		w = append(w, fmt.Sprintf("bytes=%d", c.NoSpace.Bytes))
	case "slow":
		w = append(w, c.Slow.Ops.String(), c.Slow.Delay.String())
		if c.Slow.Jitter != 0 {
			w = append(w, "jitter="+c.Slow.Jitter.String())
		}
		if c.Slow.Seed != 0 {
			w = append(w, fmt.Sprintf("seed=%d", c.Slow.Seed))
		}
		w = appendScope(w, c.Slow.Path, c.Slow.For)
	}
	return strings.Join(w, " ")
}

func appendScope(w []string, glob string, d time.Duration) []string {
	if glob != "" {
		w = append(w, "path="+glob)
	}
	if d != 0 {
		w = append(w, "for="+d.String())
	}
	return w
}

// argList parses a command's words, each at most once.
type argList struct {
	verb  string
	words []string
	seen  map[string]bool
}

func (a *argList) each(fn func(string) error) error {
	for _, w := range a.words {
		if err := fn(w); err != nil {
			return err
		}
	}
	return nil
}

func (a *argList) once(name string) error {
	if a.seen[name] {
		return fmt.Errorf("%s: %s given twice", a.verb, name)
	}
	a.seen[name] = true
	return nil
}

func (a *argList) key(w, k string) bool { return strings.HasPrefix(w, k+"=") }

func (a *argList) value(w string) (string, string, error) {
	k, v, _ := strings.Cut(w, "=")
	return k, v, a.once(k)
}

func (a *argList) opWord(w string) bool { return w == "write" || w == "fsync" || w == "all" }

func (a *argList) ops(w string, out *Ops) error {
	if err := a.once("write|fsync|all"); err != nil {
		return err
	}
	*out = map[string]Ops{"write": OpWrite, "fsync": OpFsync, "all": OpAll}[w]
	return nil
}

func (a *argList) int(w string, out *int64) error {
	k, v, err := a.value(w)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %s=%q is not an integer", a.verb, k, v)
	}
	*out = n
	return nil
}

func (a *argList) nonNegative(w string, out *int64) error {
	if err := a.int(w, out); err != nil {
		return err
	}
	if *out < 0 {
		return fmt.Errorf("%s: %s must not be negative", a.verb, w)
	}
	return nil
}

func (a *argList) positive(w string, out *int64) error {
	if err := a.int(w, out); err != nil {
		return err
	}
	if *out <= 0 {
		return fmt.Errorf("%s: %s must be positive", a.verb, w)
	}
	return nil
}

func (a *argList) duration(w string, out *time.Duration) error {
	k, v, err := a.value(w)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%s: %s=%q is not a duration such as 30s", a.verb, k, v)
	}
	*out = d
	return nil
}

func (a *argList) glob(w string, out *string) error {
	k, v, err := a.value(w)
	if err != nil {
		return err
	}
	if _, err := path.Match(v, ""); err != nil || v == "" {
		return fmt.Errorf("%s: %s=%q is not a glob", a.verb, k, v)
	}
	*out = v
	return nil
}

func (a *argList) unknown(w, want string) error {
	return fmt.Errorf("%s: unexpected %q: want %s", a.verb, w, want)
}
