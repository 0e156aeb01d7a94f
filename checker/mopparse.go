package checker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// mopParser decodes the value of send, poll and txn ops without
// reflection: these values are most of a history's bytes, and encoding/json
// allocates for every nested array. The input has already been checked to
// be valid JSON by the envelope's decoding, so the parser only has to
// enforce the schema.
type mopParser struct {
	b []byte
	i int
}

var errSyntax = errors.New("malformed JSON")

func (p *mopParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *mopParser) peek() byte {
	p.ws()
	if p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

func (p *mopParser) expect(c byte) error {
	if p.peek() != c {
		return fmt.Errorf("want %q at byte %d", c, p.i)
	}
	p.i++
	return nil
}

// next consumes a ',' and reports true, or a closing c and reports false.
func (p *mopParser) next(c byte) (bool, error) {
	switch p.peek() {
	case ',':
		p.i++
		return true, nil
	case c:
		p.i++
		return false, nil
	}
	return false, fmt.Errorf("want ',' or %q at byte %d", c, p.i)
}

// open consumes '[' and reports whether the array is empty (then also
// consuming ']').
func (p *mopParser) open(c, end byte) (bool, error) {
	if err := p.expect(c); err != nil {
		return false, err
	}
	if p.peek() == end {
		p.i++
		return true, nil
	}
	return false, nil
}

func (p *mopParser) null() bool {
	p.ws()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// int parses an integer; fractions and exponents are rejected.
func (p *mopParser) int() (int64, error) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, fmt.Errorf("%s... is not an integer", p.b[start:p.i+1])
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer at byte %d", start)
	}
	return n, nil
}

func (p *mopParser) string() (string, error) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", fmt.Errorf("want a string at byte %d", p.i)
	}
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '\\':
			escaped = true
			p.i += 2
			continue
		case '"':
			p.i++
			// Invalid UTF-8 goes through encoding/json too, which replaces
			// it with U+FFFD.
			if !escaped && utf8.Valid(p.b[start+1:p.i-1]) {
				return string(p.b[start+1 : p.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
				return "", err
			}
			return s, nil
		}
		p.i++
	}
	return "", errSyntax
}

func (p *mopParser) mops() ([]MicroOp, error) {
	empty, err := p.open('[', ']')
	if err != nil {
		return nil, fmt.Errorf("want a list of micro-ops: %w", err)
	}
	mops := []MicroOp{}
	for more := !empty; more; {
		m, err := p.mop()
		if err != nil {
			return nil, fmt.Errorf("micro-op %d: %w", len(mops), err)
		}
		mops = append(mops, m)
		if more, err = p.next(']'); err != nil {
			return nil, err
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, fmt.Errorf("trailing data at byte %d", p.i)
	}
	return mops, nil
}

func (p *mopParser) mop() (MicroOp, error) {
	empty, err := p.open('[', ']')
	if err != nil {
		return MicroOp{}, fmt.Errorf(`want ["send", k, v] or ["poll", ...]: %w`, err)
	}
	if empty {
		return MicroOp{}, errors.New("empty micro-op")
	}
	f, err := p.string()
	if err != nil {
		return MicroOp{}, fmt.Errorf("micro-op name: %w", err)
	}
	switch f {
	case FSend:
		return p.send()
	case FPoll:
		return p.poll()
	default:
		return MicroOp{}, fmt.Errorf("unknown micro-op %q (want send or poll)", f)
	}
}

func (p *mopParser) send() (MicroOp, error) {
	m := MicroOp{F: FSend}
	if err := p.expect(','); err != nil {
		return m, errors.New("send must be [\"send\", k, v]: want 3 elements")
	}
	k, err := p.int()
	if err != nil {
		return m, fmt.Errorf("send key: %w", err)
	}
	if int64(int(k)) != k {
		return m, fmt.Errorf("send key %d out of range", k)
	}
	m.Key = int(k)
	if err := p.expect(','); err != nil {
		return m, errors.New("send must be [\"send\", k, v]: want 3 elements")
	}
	if p.peek() == '[' {
		p.i++
		if !p.null() {
			o, err := p.int()
			if err != nil {
				return m, fmt.Errorf("send [offset, value]: %w", err)
			}
			m.Offset = &o
		}
		if err := p.expect(','); err != nil {
			return m, errors.New("send completion must be [offset|null, value]")
		}
		if m.Value, err = p.int(); err != nil {
			return m, fmt.Errorf("send completion must be [offset|null, value]: %w", err)
		}
		if err := p.expect(']'); err != nil {
			return m, errors.New("send completion must be [offset|null, value]")
		}
		m.Completed = true
	} else if m.Value, err = p.int(); err != nil {
		return m, fmt.Errorf("send value is not an integer: %w", err)
	}
	if err := p.expect(']'); err != nil {
		return m, errors.New("send must be [\"send\", k, v]: want 3 elements")
	}
	return m, nil
}

func (p *mopParser) poll() (MicroOp, error) {
	m := MicroOp{F: FPoll}
	if p.peek() == ']' {
		p.i++
		return m, nil
	}
	if err := p.expect(','); err != nil {
		return m, err
	}
	empty, err := p.open('{', '}')
	if err != nil {
		return m, fmt.Errorf(`poll result must be {"key": [[offset, value], ...]}: %w`, err)
	}
	m.Polls = map[int][]Pair{}
	for more := !empty; more; {
		ks, err := p.string()
		if err != nil {
			return m, fmt.Errorf("poll result key: %w", err)
		}
		k, err := strconv.Atoi(ks)
		if err != nil {
			return m, fmt.Errorf("poll result key %q is not an integer", ks)
		}
		if err := p.expect(':'); err != nil {
			return m, err
		}
		pairs, err := p.pairs(k)
		if err != nil {
			return m, err
		}
		m.Polls[k] = pairs
		if more, err = p.next('}'); err != nil {
			return m, err
		}
	}
	if err := p.expect(']'); err != nil {
		return m, fmt.Errorf("poll has more than 2 elements: %w", err)
	}
	return m, nil
}

func (p *mopParser) pairs(k int) ([]Pair, error) {
	bad := fmt.Errorf("poll of key %d: a pair must be [offset, value] with both integers", k)
	empty, err := p.open('[', ']')
	if err != nil {
		return nil, bad
	}
	pairs := []Pair{}
	for more := !empty; more; {
		if err := p.expect('['); err != nil {
			return nil, bad
		}
		o, err := p.int()
		if err != nil {
			return nil, bad
		}
		if err := p.expect(','); err != nil {
			return nil, bad
		}
		v, err := p.int()
		if err != nil {
			return nil, bad
		}
		if err := p.expect(']'); err != nil {
			return nil, bad
		}
		pairs = append(pairs, Pair{Offset: o, Value: v})
		if more, err = p.next(']'); err != nil {
			return nil, bad
		}
	}
	return pairs, nil
}

// intern returns s's constant when it is one of the common names, so that a
// million decoded ops share a handful of strings.
func intern(b []byte) string {
	switch string(b) {
	case FSend:
		return FSend
	case FPoll:
		return FPoll
	case FTxn:
		return FTxn
	case FAssign:
		return FAssign
	case FSubscribe:
		return FSubscribe
	case FCrash:
		return FCrash
	case string(Invoke):
		return string(Invoke)
	case string(OK):
		return string(OK)
	case string(Fail):
		return string(Fail)
	case string(Info):
		return string(Info)
	}
	return string(b)
}

// name reads a string; plain ones are interned without a copy.
func (p *mopParser) name() (string, error) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '"' {
		end := start + 1
		for end < len(p.b) && p.b[end] != '"' && p.b[end] != '\\' && p.b[end] < utf8.RuneSelf {
			end++
		}
		if end < len(p.b) && p.b[end] == '"' {
			p.i = end + 1
			return intern(p.b[start+1 : end]), nil
		}
	}
	return p.string()
}

// skip passes over one JSON value (known to be well formed) and returns its
// bytes.
func (p *mopParser) skip() ([]byte, error) {
	p.ws()
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		switch c := p.b[p.i]; c {
		case '"':
			if _, err := p.string(); err != nil {
				return nil, err
			}
			if depth == 0 {
				return p.b[start:p.i], nil
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth < 0 {
				return nil, errSyntax
			}
			if depth == 0 {
				p.i++
				return p.b[start:p.i], nil
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				if p.i == start {
					return nil, errSyntax
				}
				return p.b[start:p.i], nil
			}
		}
		p.i++
	}
	if depth != 0 || p.i == start {
		return nil, errSyntax
	}
	return p.b[start:p.i], nil
}

// envelope reads one history line's fields without reflection. It reports
// false for anything unusual, and the caller falls back to encoding/json,
// which then accepts the line or explains what is wrong with it.
func (p *mopParser) envelope(j *opJSON) bool {
	empty, err := p.open('{', '}')
	if err != nil {
		return false
	}
	for more := !empty; more; {
		key, err := p.name()
		if err != nil || p.expect(':') != nil {
			return false
		}
		if p.null() {
			switch key {
			case "index":
				j.Index = nil
			case "process":
				j.Process = nil
			case "type":
				j.Type = ""
			case "f":
				j.F = ""
			case "value":
				j.Value = nil
			case "error":
				j.Error = ""
			case "rebalance-log":
				j.RebalanceLog = nil
			case "committed":
				j.Committed = nil
			case "group-offsets":
				j.GroupOffsets = nil
			}
		} else {
			switch key {
			case "index":
				n, err := p.int()
				if err != nil {
					return false
				}
				j.Index = &n
			case "time":
				if j.Time, err = p.int(); err != nil {
					return false
				}
			case "process":
				if j.Process, err = p.skip(); err != nil {
					return false
				}
			case "type":
				t, err := p.name()
				if err != nil {
					return false
				}
				j.Type = OpType(t)
			case "f":
				if j.F, err = p.name(); err != nil {
					return false
				}
			case "value":
				if j.Value, err = p.skip(); err != nil {
					return false
				}
			case "error":
				if j.Error, err = p.string(); err != nil {
					return false
				}
			case "seek-to-beginning", "fenced":
				raw, err := p.skip()
				if err != nil || string(raw) != "true" && string(raw) != "false" {
					return false
				}
				if key == "fenced" {
					j.Fenced = string(raw) == "true"
				} else {
					j.SeekToBeginning = string(raw) == "true"
				}
			case "rebalance-log":
				raw, err := p.skip()
				if err != nil {
					return false
				}
				j.RebalanceLog = nil
				if json.Unmarshal(raw, &j.RebalanceLog) != nil {
					return false
				}
			case "committed", "group-offsets":
				raw, err := p.skip()
				if err != nil {
					return false
				}
				dst := &j.Committed
				if key == "group-offsets" {
					dst = &j.GroupOffsets
				}
				*dst = nil
				if json.Unmarshal(raw, dst) != nil {
					return false
				}
			default:
				if _, err := p.skip(); err != nil {
					return false
				}
			}
		}
		if more, err = p.next('}'); err != nil {
			return false
		}
	}
	p.ws()
	return p.i == len(p.b)
}
