package config

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePropertiesSyntax(t *testing.T) {
	tests := []struct {
		name string
		text string
		want map[string]string
	}{
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"colon", "a:b", map[string]string{"a": "b"}},
		{"blank separator", "a b", map[string]string{"a": "b"}},
		{"tab and form feed separate", "a\t\fb", map[string]string{"a": "b"}},
		{"blanks around separator", "a \t= \tb", map[string]string{"a": "b"}},
		{"blanks then colon", "a   :   b", map[string]string{"a": "b"}},
		{"trailing blanks kept", "a=b  ", map[string]string{"a": "b  "}},
		{"leading blanks skipped", "  \t\fa=b", map[string]string{"a": "b"}},
		{"second separator is value", "a==b", map[string]string{"a": "=b"}},
		{"separator inside value", "url=PLAINTEXT://h:9092", map[string]string{"url": "PLAINTEXT://h:9092"}},
		{"empty value with separator", "a=", map[string]string{"a": ""}},
		{"key alone", "a", map[string]string{"a": ""}},
		{"empty key", "=b", map[string]string{"": "b"}},
		{"hash comment", "# a=b\nc=d", map[string]string{"c": "d"}},
		{"bang comment", "! a=b\nc=d", map[string]string{"c": "d"}},
		{"indented comment", "   # a=b\nc=d", map[string]string{"c": "d"}},
		{"hash inside value", "a=b#c", map[string]string{"a": "b#c"}},
		{"blank lines", "\n\n  \n\ta=b\n\n", map[string]string{"a": "b"}},
		{"continuation", "a=b\\\n   c", map[string]string{"a": "bc"}},
		{"continuation of key", "ab\\\n  c=d", map[string]string{"abc": "d"}},
		{"multiple continuations", "list=x,\\\n  y,\\\n  z", map[string]string{"list": "x,y,z"}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", map[string]string{"a": `b\`, "c": "d"}},
		{"odd backslashes continue", "a=b\\\\\\\n c", map[string]string{"a": `b\c`}},
		{"comment never continues", "# x \\\na=b", map[string]string{"a": "b"}},
		{"continued line starting with hash is value", "a=b\\\n#c", map[string]string{"a": "b#c"}},
		{"empty continuation line ends the value", "a=b\\\n\nc=d", map[string]string{"a": "b", "c": "d"}},
		{"blank continuation line ends the value", "a=b\\\n   \nc=d", map[string]string{"a": "b", "c": "d"}},
		{"backslash at end of file", "a=b\\", map[string]string{"a": "b"}},
		{"CRLF", "a=b\r\nc=d\r\n", map[string]string{"a": "b", "c": "d"}},
		{"CR", "a=b\rc=d\r", map[string]string{"a": "b", "c": "d"}},
		{"CRLF continuation", "a=b\\\r\n  c\r\n", map[string]string{"a": "bc"}},
		{"escaped equals in key", `a\=b=c`, map[string]string{"a=b": "c"}},
		{"escaped colon in key", `a\:b:c`, map[string]string{"a:b": "c"}},
		{"escaped blank in key", `a\ b c`, map[string]string{"a b": "c"}},
		{"control escapes", `a=\t\n\r\f`, map[string]string{"a": "\t\n\r\f"}},
		{"other escapes stand for themselves", `a=\x\\\#\"`, map[string]string{"a": `x\#"`}},
		{"unicode escape", `a=\u0041\u00e9\u00E9`, map[string]string{"a": "Aéé"}},
		{"unicode escape in key", `\u006bey=v`, map[string]string{"key": "v"}},
		{"surrogate pair", `a=\uD83D\uDE00`, map[string]string{"a": "😀"}},
		{"lone surrogate", `a=\uD83Dx`, map[string]string{"a": "\uFFFDx"}},
		{"raw UTF-8", "a=é", map[string]string{"a": "é"}},
		{"last duplicate wins", "a=1\na=2", map[string]string{"a": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties(strings.NewReader(tt.text))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParsePropertiesOrderedLines(t *testing.T) {
	text := "# header\n\na=1\nb=x,\\\n  y\nc=3\na=4\n"
	got, err := ParsePropertiesOrdered(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, []Property{
		{Key: "a", Value: "1", Line: 3},
		{Key: "b", Value: "x,y", Line: 4},
		{Key: "c", Value: "3", Line: 6},
		{Key: "a", Value: "4", Line: 7},
	}, got)
}

func TestParsePropertiesErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"short unicode escape at end", "x=1\na=\\u12", `properties line 2: value of "a": malformed \uXXXX escape "\\u12": need 4 hex digits`},
		{"non-hex unicode escape", "a=\\u12G4x", `properties line 1: value of "a": malformed \uXXXX escape "\\u12G4": need 4 hex digits`},
		{"bad escape in key", "\\uzzzz=1", `properties line 1: key: malformed \uXXXX escape "\\uzzzz": need 4 hex digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProperties(strings.NewReader(tt.text))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestParsePropertiesRefusesHugeInput(t *testing.T) {
	_, err := ParseProperties(strings.NewReader(strings.Repeat("#", fileBytesMax+1)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than 16777216 bytes")
}

// escapeProperty writes s so that ParseProperties reads it back unchanged.
func escapeProperty(s string, isKey bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\' || r == '=' || r == ':' || r == '#' || r == '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == ' ' && (isKey || i == 0):
			b.WriteString(`\ `)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("process.roles=broker,controller\nnode.id=1\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n" +
		"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@localhost:9093\nadvertised.listeners=PLAINTEXT://localhost:9092\n"))
	f.Add([]byte("a=b\\\n  c\n# x\\\n!y\nk\\ e\\=y : \\u00e9\\uD83D\\uDE00\r\n"))
	f.Add([]byte("log.segment.bytes=abc\nlisteners=SSL://0.0.0.0:9092\nnode.id=-1\nbroker.id=2\nunsafe.x=maybe"))
	f.Add([]byte("log.retention.hours=99999999999999\nlog.retention.minutes=-5\ncontroller.quorum.voters=1@[::1]:9093,1@h:1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		props, err := ParsePropertiesOrdered(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		m := map[string]string{}
		for _, p := range props {
			m[p.Key] = p.Value
			if !utf8.ValidString(p.Key) || !utf8.ValidString(p.Value) {
				continue
			}
			// A pair written back with escapes reads back the same.
			line := escapeProperty(p.Key, true) + "=" + escapeProperty(p.Value, false)
			again, err := ParseProperties(strings.NewReader(line))
			if err != nil {
				t.Fatalf("re-parse %q: %v", line, err)
			}
			if again[p.Key] != p.Value || len(again) != 1 {
				t.Fatalf("round trip of %q=%q through %q gave %q", p.Key, p.Value, line, again)
			}
		}
		c, _, err := FromMap(m)
		if err != nil {
			if len(Problems(err)) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			checkLinesNameAKey(t, err)
			return
		}
		entries := c.Entries()
		if len(entries) < len(brokerKeys) {
			t.Fatalf("Entries lists %d keys, want at least %d", len(entries), len(brokerKeys))
		}
		if _, err := c.TopicConfig(nil); err != nil {
			t.Fatalf("a valid broker config must give valid topic defaults: %v", err)
		}
	})
}
