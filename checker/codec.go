package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Functions whose value is a list of micro-ops.
const (
	FSend      = "send"
	FPoll      = "poll"
	FTxn       = "txn"
	FAssign    = "assign"
	FSubscribe = "subscribe"
	FCrash     = "crash"
)

// hasMops reports whether ops with function f carry micro-ops as value.
func hasMops(f string) bool { return f == FSend || f == FPoll || f == FTxn }

// hasKeys reports whether ops with function f carry a key list as value.
func hasKeys(f string) bool { return f == FAssign || f == FSubscribe }

// opJSON is the envelope of one history line; Value is decoded by F.
type opJSON struct {
	Index           *int64          `json:"index"`
	Time            int64           `json:"time"`
	Process         json.RawMessage `json:"process"`
	Type            OpType          `json:"type"`
	F               string          `json:"f"`
	Value           json.RawMessage `json:"value"`
	Error           string          `json:"error"`
	SeekToBeginning bool            `json:"seek-to-beginning"`
	RebalanceLog    []Rebalance     `json:"rebalance-log"`
	Committed       map[int]int64   `json:"committed"`
	GroupOffsets    map[int]int64   `json:"group-offsets"`
	Fenced          bool            `json:"fenced"`
}

// UnmarshalJSON decodes one history line as DESIGN.md describes it. It is
// strict about the parts the checker relies on (type, process, integer keys,
// offsets and values) and keeps the value of any other function verbatim.
func (o *Op) UnmarshalJSON(data []byte) error {
	var j opJSON
	fast := mopParser{b: data}
	if !json.Valid(data) || !fast.envelope(&j) {
		j = opJSON{}
		if err := json.Unmarshal(data, &j); err != nil {
			return err
		}
	}
	if j.Index == nil {
		return errors.New(`missing "index"`)
	}
	switch j.Type {
	case Invoke, OK, Fail, Info:
	case "":
		return errors.New(`missing "type"`)
	default:
		return fmt.Errorf("type %q is not invoke, ok, fail or info", j.Type)
	}
	if j.F == "" {
		return errors.New(`missing "f"`)
	}
	process, err := decodeProcess(j.Process)
	if err != nil {
		return err
	}
	*o = Op{
		Index:           *j.Index,
		Time:            j.Time,
		Process:         process,
		Type:            j.Type,
		F:               j.F,
		Error:           j.Error,
		SeekToBeginning: j.SeekToBeginning,
		RebalanceLog:    j.RebalanceLog,
		Committed:       j.Committed,
		GroupOffsets:    j.GroupOffsets,
		Fenced:          j.Fenced,
	}
	value := j.Value
	if len(value) == 0 || string(value) == "null" {
		return nil
	}
	switch {
	case hasMops(j.F):
		mp := mopParser{b: value}
		mops, err := mp.mops()
		if err != nil {
			return fmt.Errorf("%s value: %w", j.F, err)
		}
		o.Mops = mops
	case hasKeys(j.F):
		var keys []int
		if err := json.Unmarshal(value, &keys); err != nil {
			return fmt.Errorf("%s value must be a list of integer keys: %w", j.F, err)
		}
		o.Keys = keys
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, value); err != nil {
			return fmt.Errorf("%s value: %w", j.F, err)
		}
		o.Raw = buf.Bytes()
	}
	return nil
}

func decodeProcess(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, errors.New(`missing "process"`)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("process: %w", err)
		}
		switch s {
		case "nemesis":
			return NemesisProcess, nil
		case "harness":
			return HarnessProcess, nil
		}
		return 0, fmt.Errorf(`process %q is neither an integer nor "nemesis" or "harness"`, s)
	}
	p, err := strconv.Atoi(string(raw))
	if err != nil || p < 0 {
		return 0, fmt.Errorf(`process %s is neither a non-negative integer nor "nemesis"`, raw)
	}
	return p, nil
}

// MarshalJSON encodes the op as one history line (without the newline).
func (o Op) MarshalJSON() ([]byte, error) {
	return o.appendJSON(make([]byte, 0, 128)), nil
}

// appendJSON appends the op's JSON form to b. Keys of polls are written in
// ascending order, so equal ops encode to equal bytes.
func (o Op) appendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, o.Index, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, o.Time, 10)
	b = append(b, `,"process":`...)
	switch o.Process {
	case NemesisProcess:
		b = append(b, `"nemesis"`...)
	case HarnessProcess:
		b = append(b, `"harness"`...)
	default:
		b = strconv.AppendInt(b, int64(o.Process), 10)
	}
	b = append(b, `,"type":`...)
	b = appendString(b, string(o.Type))
	b = append(b, `,"f":`...)
	b = appendString(b, o.F)
	switch {
	case o.Mops != nil:
		b = append(b, `,"value":`...)
		b = appendMops(b, o.Mops)
	case o.Keys != nil:
		b = append(b, `,"value":[`...)
		for i, k := range o.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(k), 10)
		}
		b = append(b, ']')
	case o.Raw != nil:
		b = append(b, `,"value":`...)
		b = appendRaw(b, o.Raw)
	}
	if o.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, o.Error)
	}
	if o.SeekToBeginning {
		b = append(b, `,"seek-to-beginning":true`...)
	}
	if o.RebalanceLog != nil {
		b = append(b, `,"rebalance-log":[`...)
		for i, r := range o.RebalanceLog {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"keys":`...)
			if r.Keys == nil {
				b = append(b, "null"...)
			} else {
				b = append(b, '[')
				for j, k := range r.Keys {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendInt(b, int64(k), 10)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendOffsets(b, "committed", o.Committed)
	b = appendOffsets(b, "group-offsets", o.GroupOffsets)
	if o.Fenced {
		b = append(b, `,"fenced":true`...)
	}
	return append(b, '}')
}

// appendOffsets appends `,"name":{"key":offset,...}` for a non-nil map.
func appendOffsets(b []byte, name string, offsets map[int]int64) []byte {
	if offsets == nil {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":{`...)
	for i, k := range slices.Sorted(maps.Keys(offsets)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, offsets[k], 10)
	}
	return append(b, '}')
}

func appendMops(b []byte, mops []MicroOp) []byte {
	b = append(b, '[')
	for i, m := range mops {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case m.F == FSend && m.Completed:
			b = append(b, `["send",`...)
			b = strconv.AppendInt(b, int64(m.Key), 10)
			b = append(b, ",["...)
			if m.Offset == nil {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, *m.Offset, 10)
			}
			b = append(b, ',')
			b = strconv.AppendInt(b, m.Value, 10)
			b = append(b, "]]"...)
		case m.F == FSend:
			b = append(b, `["send",`...)
			b = strconv.AppendInt(b, int64(m.Key), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, m.Value, 10)
			b = append(b, ']')
		case m.Polls == nil:
			b = append(b, `["poll"]`...)
		default:
			b = append(b, `["poll",{`...)
			keys := make([]int, 0, len(m.Polls))
			for k := range m.Polls {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for j, k := range keys {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '"')
				b = strconv.AppendInt(b, int64(k), 10)
				b = append(b, `":[`...)
				for n, p := range m.Polls[k] {
					if n > 0 {
						b = append(b, ',')
					}
					b = append(b, '[')
					b = strconv.AppendInt(b, p.Offset, 10)
					b = append(b, ',')
					b = strconv.AppendInt(b, p.Value, 10)
					b = append(b, ']')
				}
				b = append(b, ']')
			}
			b = append(b, "}]"...)
		}
	}
	return append(b, ']')
}

// appendRaw appends a verbatim JSON value, compacted; a value that is not
// valid JSON is written as a JSON string so the line stays parseable.
func appendRaw(b []byte, raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return appendString(b, string(raw))
	}
	return append(b, buf.Bytes()...)
}

// appendString appends s as a JSON string; plain ASCII takes a fast path.
func appendString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	enc, err := json.Marshal(s)
	if err != nil {
		// json.Marshal of a string cannot fail; keep the line valid anyway.
		return append(b, `""`...)
	}
	return append(b, enc...)
}

// MarshalJSON writes true, false or "unknown".
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	default:
		return []byte(`"unknown"`), nil
	}
}

// UnmarshalJSON reads true, false or "unknown".
func (v *Validity) UnmarshalJSON(data []byte) error {
	switch string(bytes.TrimSpace(data)) {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	case `"unknown"`:
		*v = Unknown
	default:
		return fmt.Errorf(`validity %s is not true, false or "unknown"`, data)
	}
	return nil
}

// String returns "valid", "invalid" or "unknown".
func (v Validity) String() string {
	switch v {
	case Valid:
		return "valid"
	case Invalid:
		return "invalid"
	default:
		return "unknown"
	}
}
