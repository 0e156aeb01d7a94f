package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Jepsen writes histories as EDN (history.edn: one op map per line, or one
// vector of them), and its checker tests write ops with keywords for keys
// and values ([:send :x :a]). ReadEDNHistory reads that notation into a
// History: each op map becomes one history line, keywords used as keys or
// values get integers (in order of first appearance, above any integer of
// the same kind in the history), and the mapping is returned as notes.

// ednKeyword is an EDN keyword, without its colon.
type ednKeyword string

// ednSymbol is an EDN symbol other than nil, true and false.
type ednSymbol string

// ednMap keeps an EDN map's entries in order.
type ednMap struct {
	keys, vals []any
}

func (m *ednMap) get(k ednKeyword) (any, bool) {
	for i, key := range m.keys {
		if kw, ok := key.(ednKeyword); ok && kw == k {
			return m.vals[i], true
		}
	}
	return nil, false
}

// ednDepthMax bounds nesting, so hostile input cannot exhaust the stack.
const ednDepthMax = 200

type ednParser struct {
	b     []byte
	i     int
	depth int
}

func (p *ednParser) errf(format string, args ...any) error {
	return fmt.Errorf("edn at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *ednParser) ws() {
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			p.i++
		case c == ';':
			for p.i < len(p.b) && p.b[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func isDelim(c byte) bool {
	return strings.IndexByte(" \t\r\n,()[]{}\";", c) >= 0
}

// value parses one EDN value.
func (p *ednParser) value() (any, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, p.errf("unexpected end of input")
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > ednDepthMax {
		return nil, p.errf("nested deeper than %d", ednDepthMax)
	}
	switch c := p.b[p.i]; c {
	case '[', '(':
		end := byte(']')
		if c == '(' {
			end = ')'
		}
		p.i++
		return p.seq(end)
	case '{':
		p.i++
		return p.mapBody()
	case '"':
		return p.str()
	case ':':
		p.i++
		tok := p.token()
		if tok == "" {
			return nil, p.errf("empty keyword")
		}
		return ednKeyword(tok), nil
	case '\\':
		p.i++
		if p.i >= len(p.b) {
			return nil, p.errf("empty character")
		}
		start := p.i
		p.i++
		for p.i < len(p.b) && !isDelim(p.b[p.i]) {
			p.i++
		}
		return string(p.b[start:p.i]), nil
	case '#':
		p.i++
		if p.i >= len(p.b) {
			return nil, p.errf("lone #")
		}
		switch p.b[p.i] {
		case '{':
			p.i++
			return p.seq('}') // a set: a vector is as good here
		case '_':
			p.i++
			if _, err := p.value(); err != nil {
				return nil, err
			}
			return p.value()
		}
		// A tagged element (#jepsen.history.Op{...}, #inst "..."): the
		// tag is dropped, the element kept.
		if p.token() == "" {
			return nil, p.errf("bad tag")
		}
		return p.value()
	}
	tok := p.token()
	if tok == "" {
		return nil, p.errf("unexpected %q", p.b[p.i])
	}
	switch tok {
	case "nil":
		return nil, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if c := tok[0]; c >= '0' && c <= '9' || (c == '-' || c == '+') && len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9' {
		t := strings.TrimSuffix(tok, "N")
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(strings.TrimSuffix(tok, "M"), 64); err == nil {
			return f, nil
		}
		return nil, p.errf("bad number %q", tok)
	}
	return ednSymbol(tok), nil
}

func (p *ednParser) token() string {
	start := p.i
	for p.i < len(p.b) && !isDelim(p.b[p.i]) {
		p.i++
	}
	return string(p.b[start:p.i])
}

func (p *ednParser) seq(end byte) ([]any, error) {
	out := []any{}
	for {
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.errf("unclosed %q", end)
		}
		if p.b[p.i] == end {
			p.i++
			return out, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

func (p *ednParser) mapBody() (*ednMap, error) {
	items, err := p.seq('}')
	if err != nil {
		return nil, err
	}
	if len(items)%2 != 0 {
		return nil, p.errf("map with an odd number of forms")
	}
	m := &ednMap{}
	for i := 0; i < len(items); i += 2 {
		m.keys = append(m.keys, items[i])
		m.vals = append(m.vals, items[i+1])
	}
	return m, nil
}

func (p *ednParser) str() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch c {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			p.i++
			if p.i >= len(p.b) {
				return "", p.errf("unterminated string")
			}
			switch e := p.b[p.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(e)
			}
			p.i++
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", p.errf("unterminated string")
}

// ednInterner gives keywords (and other non-integers) integers of one kind
// (keys or values), above every integer of that kind in the history.
type ednInterner struct {
	kind  string
	base  int64
	ids   map[string]int64
	order []string
}

func (in *ednInterner) id(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case ednKeyword, ednSymbol, string:
		s := ednString(x)
		if id, ok := in.ids[s]; ok {
			return id, nil
		}
		id := in.base + int64(len(in.order))
		in.ids[s] = id
		in.order = append(in.order, s)
		return id, nil
	}
	return 0, fmt.Errorf("%s %v is neither an integer nor a keyword", in.kind, ednString(v))
}

func (in *ednInterner) note() string {
	if len(in.order) == 0 {
		return ""
	}
	parts := make([]string, len(in.order))
	for i, s := range in.order {
		parts[i] = fmt.Sprintf("%s=%d", s, in.ids[s])
	}
	return fmt.Sprintf("EDN %ss mapped to integers: %s", in.kind, strings.Join(parts, " "))
}

// ednString renders a value as Jepsen would print it.
func ednString(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case ednKeyword:
		return ":" + string(x)
	case ednSymbol:
		return string(x)
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = ednString(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *ednMap:
		parts := make([]string, 0, 2*len(x.keys))
		for i := range x.keys {
			parts = append(parts, ednString(x.keys[i]), ednString(x.vals[i]))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return fmt.Sprint(v)
}

// ednJSON renders a value as plain JSON (keywords as strings), for the
// values the checker keeps verbatim.
func ednJSON(v any) any {
	switch x := v.(type) {
	case ednKeyword:
		return string(x)
	case ednSymbol:
		return string(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = ednJSON(e)
		}
		return out
	case *ednMap:
		out := map[string]any{}
		for i := range x.keys {
			k := ednString(x.keys[i])
			if kw, ok := x.keys[i].(ednKeyword); ok {
				k = string(kw)
			}
			out[k] = ednJSON(x.vals[i])
		}
		return out
	case float64:
		if x != x || x > 1e308 || x < -1e308 {
			return nil
		}
	}
	return v
}

// ReadEDNHistory reads a history in Jepsen's EDN notation: op maps one
// after another (history.edn) or inside one vector. It returns the history
// and notes saying which integers keywords became.
func ReadEDNHistory(r io.Reader) (History, []string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	p := &ednParser{b: b}
	var forms []any
	for {
		p.ws()
		if p.i >= len(p.b) {
			break
		}
		v, err := p.value()
		if err != nil {
			return nil, nil, err
		}
		if vec, ok := v.([]any); ok && len(forms) == 0 {
			forms = append(forms, vec...)
			continue
		}
		forms = append(forms, v)
	}
	ops := make([]*ednMap, 0, len(forms))
	for i, f := range forms {
		m, ok := f.(*ednMap)
		if !ok {
			return nil, nil, fmt.Errorf("edn form %d is not an op map: %s", i, truncate(ednString(f)))
		}
		ops = append(ops, m)
	}
	keys := &ednInterner{kind: "key", ids: map[string]int64{}}
	vals := &ednInterner{kind: "value", ids: map[string]int64{}}
	for _, m := range ops {
		maxInts(m, &keys.base, &vals.base)
	}
	h := make(History, 0, len(ops))
	for i, m := range ops {
		line, err := ednOpJSON(m, int64(i), keys, vals)
		if err != nil {
			return nil, nil, fmt.Errorf("edn op %d: %w", i, err)
		}
		var op Op
		if err := json.Unmarshal(line, &op); err != nil {
			return nil, nil, fmt.Errorf("edn op %d: %w", i, err)
		}
		h = append(h, op)
	}
	var notes []string
	for _, in := range []*ednInterner{keys, vals} {
		if n := in.note(); n != "" {
			notes = append(notes, n)
		}
	}
	return h, notes, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		s = s[:80]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return s + "..."
	}
	return s
}

// maxInts raises the interners' bases above the integer keys and values
// the op uses, so keywords never collide with them.
func maxInts(m *ednMap, keyBase, valBase *int64) {
	f, _ := m.get("f")
	v, _ := m.get("value")
	raise := func(b *int64, x any) {
		if n, ok := x.(int64); ok && n >= *b && n < 1<<62 {
			*b = n + 1
		}
	}
	switch f {
	case ednKeyword(FAssign), ednKeyword(FSubscribe):
		vs, _ := v.([]any)
		for _, k := range vs {
			raise(keyBase, k)
		}
	case ednKeyword(FSend), ednKeyword(FPoll), ednKeyword(FTxn):
		mops, _ := v.([]any)
		for _, mop := range mops {
			mv, _ := mop.([]any)
			if len(mv) < 2 {
				continue
			}
			switch mv[0] {
			case ednKeyword(FSend):
				raise(keyBase, mv[1])
				if len(mv) > 2 {
					if pair, ok := mv[2].([]any); ok && len(pair) == 2 {
						raise(valBase, pair[1])
					} else {
						raise(valBase, mv[2])
					}
				}
			case ednKeyword(FPoll):
				pm, _ := mv[1].(*ednMap)
				if pm == nil {
					continue
				}
				for i := range pm.keys {
					raise(keyBase, pm.keys[i])
					pairs, _ := pm.vals[i].([]any)
					for _, pr := range pairs {
						if pv, ok := pr.([]any); ok && len(pv) == 2 {
							raise(valBase, pv[1])
						}
					}
				}
			}
		}
	}
}

// ednOpJSON renders one op map as a history.jsonl line.
func ednOpJSON(m *ednMap, pos int64, keys, vals *ednInterner) ([]byte, error) {
	out := map[string]any{}
	for i, k := range m.keys {
		kw, ok := k.(ednKeyword)
		if !ok {
			continue
		}
		v := m.vals[i]
		switch kw {
		case "index", "time":
			n, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf(":%s %s is not an integer", kw, ednString(v))
			}
			out[string(kw)] = n
		case "process":
			switch x := v.(type) {
			case int64:
				out["process"] = x
			default:
				out["process"] = ednJSON(x)
			}
		case "type", "f":
			out[string(kw)] = ednJSON(v)
		case "error":
			if s, ok := v.(string); ok {
				out["error"] = s
			} else if v != nil {
				out["error"] = ednString(v)
			}
		case "seek-to-beginning?", "seek-to-beginning":
			if b, ok := v.(bool); ok {
				out["seek-to-beginning"] = b
			}
		}
	}
	if _, ok := out["index"]; !ok {
		out["index"] = pos // Jepsen's test histories leave :index to h/history
	}
	if _, ok := out["time"]; !ok {
		out["time"] = pos
	}
	f, _ := m.get("f")
	v, _ := m.get("value")
	var err error
	switch f {
	case ednKeyword(FSend), ednKeyword(FPoll), ednKeyword(FTxn):
		out["value"], err = ednMops(v, keys, vals)
	case ednKeyword(FAssign), ednKeyword(FSubscribe):
		vs, ok := v.([]any)
		if !ok && v != nil {
			return nil, fmt.Errorf("%s value %s is not a list of keys", ednString(f), truncate(ednString(v)))
		}
		ks := make([]int64, 0, len(vs))
		for _, k := range vs {
			id, err := keys.id(k)
			if err != nil {
				return nil, err
			}
			ks = append(ks, id)
		}
		out["value"] = ks
	default:
		out["value"] = ednJSON(v)
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

func ednMops(v any, keys, vals *ednInterner) ([]any, error) {
	list, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil, errors.New("micro-ops are nil")
		}
		return nil, fmt.Errorf("micro-ops %s are not a list", truncate(ednString(v)))
	}
	out := make([]any, 0, len(list))
	for _, mop := range list {
		mv, ok := mop.([]any)
		if !ok || len(mv) == 0 {
			return nil, fmt.Errorf("micro-op %s is not [:send k v] or [:poll ...]", truncate(ednString(mop)))
		}
		switch mv[0] {
		case ednKeyword(FSend):
			if len(mv) != 3 {
				return nil, fmt.Errorf("micro-op %s is not [:send k v]", truncate(ednString(mop)))
			}
			k, err := keys.id(mv[1])
			if err != nil {
				return nil, err
			}
			if pair, ok := mv[2].([]any); ok {
				if len(pair) != 2 {
					return nil, fmt.Errorf("send completion %s is not [offset value]", truncate(ednString(mv[2])))
				}
				var off any
				if pair[0] != nil {
					o, ok := pair[0].(int64)
					if !ok {
						return nil, fmt.Errorf("send offset %s is not an integer", ednString(pair[0]))
					}
					off = o
				}
				val, err := vals.id(pair[1])
				if err != nil {
					return nil, err
				}
				out = append(out, []any{FSend, k, []any{off, val}})
				continue
			}
			val, err := vals.id(mv[2])
			if err != nil {
				return nil, err
			}
			out = append(out, []any{FSend, k, val})
		case ednKeyword(FPoll):
			if len(mv) == 1 || mv[1] == nil {
				out = append(out, []any{FPoll})
				continue
			}
			pm, ok := mv[1].(*ednMap)
			if !ok || len(mv) != 2 {
				return nil, fmt.Errorf("micro-op %s is not [:poll {k [[offset value] ...]}]", truncate(ednString(mop)))
			}
			polls := map[string][][2]int64{}
			for i := range pm.keys {
				k, err := keys.id(pm.keys[i])
				if err != nil {
					return nil, err
				}
				pairs, ok := pm.vals[i].([]any)
				if !ok && pm.vals[i] != nil {
					return nil, fmt.Errorf("poll of %s: %s is not a list of [offset value]", ednString(pm.keys[i]), truncate(ednString(pm.vals[i])))
				}
				ps := make([][2]int64, 0, len(pairs))
				for _, pr := range pairs {
					pv, ok := pr.([]any)
					if !ok || len(pv) != 2 {
						return nil, fmt.Errorf("poll pair %s is not [offset value]", truncate(ednString(pr)))
					}
					o, ok := pv[0].(int64)
					if !ok {
						return nil, fmt.Errorf("poll offset %s is not an integer", ednString(pv[0]))
					}
					val, err := vals.id(pv[1])
					if err != nil {
						return nil, err
					}
					ps = append(ps, [2]int64{o, val})
				}
				polls[strconv.FormatInt(k, 10)] = ps
			}
			out = append(out, []any{FPoll, polls})
		default:
			return nil, fmt.Errorf("unknown micro-op %s (want :send or :poll)", truncate(ednString(mv[0])))
		}
	}
	return out, nil
}
