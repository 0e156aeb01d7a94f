package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// ComponentKey is the slog attribute that names the part of the broker a log
// line comes from ("LogManager", "KafkaServer", ...). The Kafka-style
// handler prints it in parentheses at the end of the line, where Kafka
// prints its logger name.
const ComponentKey = "component"

// KafkaHandler is a slog.Handler that writes lines in Kafka's log4j layout:
//
//	[2026-11-29 16:00:00,123] INFO Loading logs from log dirs [/data] (LogManager)
//
// Attributes other than the component follow the message as key=value pairs,
// so the seeds' wording stays greppable at the start of the message.
type KafkaHandler struct {
	mu        *sync.Mutex
	w         io.Writer
	level     slog.Leveler
	component string
	attrs     string // preformatted " k=v" pairs from WithAttrs
	groups    string // dotted group prefix for later attribute keys
}

// NewKafkaHandler returns a handler writing to w at level and above. A nil
// level means INFO.
func NewKafkaHandler(w io.Writer, level slog.Leveler) *KafkaHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &KafkaHandler{mu: &sync.Mutex{}, w: w, level: level}
}

// Enabled implements slog.Handler.
func (h *KafkaHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// WithAttrs implements slog.Handler.
func (h *KafkaHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		if h.groups == "" && a.Key == ComponentKey {
			c.component = a.Value.String()
			continue
		}
		appendAttr(&b, h.groups, a)
	}
	c.attrs = b.String()
	return &c
}

// WithGroup implements slog.Handler.
func (h *KafkaHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = h.groups + name + "."
	return &c
}

// Handle implements slog.Handler.
func (h *KafkaHandler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	var b strings.Builder
	b.Grow(128 + len(r.Message))
	b.WriteByte('[')
	b.WriteString(t.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, ",%03d] ", t.Nanosecond()/int(time.Millisecond))
	b.WriteString(levelName(r.Level))
	b.WriteByte(' ')
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	component := h.component
	r.Attrs(func(a slog.Attr) bool {
		if h.groups == "" && a.Key == ComponentKey {
			component = a.Value.String()
			return true
		}
		appendAttr(&b, h.groups, a)
		return true
	})
	if component != "" {
		b.WriteString(" (")
		b.WriteString(component)
		b.WriteByte(')')
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// levelName maps slog levels to log4j's names.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "TRACE"
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARN"
	default:
		return "ERROR"
	}
}

func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			appendAttr(b, p, g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		fmt.Fprintf(b, "%q", v)
		return
	}
	b.WriteString(v)
}
