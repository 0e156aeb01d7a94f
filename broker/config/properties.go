package config

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
)

// fileBytesMax bounds how much of a properties file is read, so that a
// config path pointing at a device or a huge file cannot exhaust memory.
const fileBytesMax = 16 << 20

// Property is one key=value pair of a properties file, with the 1-based line
// its logical line starts on.
type Property struct {
	Key   string
	Value string
	Line  int
}

// ParseProperties reads Java properties text (the format of Kafka's
// server.properties) and returns its key/value pairs; a key given twice keeps
// its last value, as java.util.Properties does. See ParsePropertiesOrdered for
// the syntax.
func ParseProperties(r io.Reader) (map[string]string, error) {
	props, err := ParsePropertiesOrdered(r)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(props))
	for _, p := range props {
		m[p.Key] = p.Value
	}
	return m, nil
}

// ParsePropertiesOrdered reads Java properties text and returns every pair in
// file order, duplicates included. It follows java.util.Properties.load:
//
//   - lines end with \n, \r or \r\n; leading spaces, tabs and form feeds are
//     skipped; blank lines are ignored;
//   - a line whose first non-blank character is '#' or '!' is a comment (a
//     comment never continues onto the next line);
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - the key ends at the first unescaped '=', ':' or blank; blanks around
//     the separator are skipped, and blanks alone separate too;
//   - escapes \t \n \r \f and \uXXXX (UTF-16, surrogate pairs joined) are
//     decoded in keys and values; a backslash before any other character
//     stands for that character.
//
// Unlike Kafka, which reads the file as ISO-8859-1, the text is taken as
// UTF-8, which is what editors write today. The only error is a malformed
// \uXXXX escape or a read failure.
func ParsePropertiesOrdered(r io.Reader) ([]Property, error) {
	data, err := io.ReadAll(io.LimitReader(r, fileBytesMax+1))
	if err != nil {
		return nil, fmt.Errorf("read properties: %w", err)
	}
	if len(data) > fileBytesMax {
		return nil, fmt.Errorf("read properties: larger than %d bytes; is this a properties file?", fileBytesMax)
	}
	lines := splitLines(data)
	var props []Property
	for i := 0; i < len(lines); {
		lineNo := i + 1
		first := trimBlanksLeft(lines[i])
		i++
		if len(first) == 0 || first[0] == '#' || first[0] == '!' {
			continue
		}
		var logical strings.Builder
		segment := first
		for oddTrailingBackslashes(segment) {
			logical.WriteString(segment[:len(segment)-1])
			segment = ""
			if i >= len(lines) {
				break
			}
			segment = trimBlanksLeft(lines[i])
			i++
		}
		logical.WriteString(segment)
		key, value, err := splitKeyValue(logical.String())
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		props = append(props, Property{Key: key, Value: value, Line: lineNo})
	}
	return props, nil
}

// splitLines splits on \n, \r\n and \r.
func splitLines(data []byte) []string {
	var lines []string
	start := 0
	for j := 0; j < len(data); j++ {
		switch data[j] {
		case '\n':
			lines = append(lines, string(data[start:j]))
			start = j + 1
		case '\r':
			lines = append(lines, string(data[start:j]))
			if j+1 < len(data) && data[j+1] == '\n' {
				j++
			}
			start = j + 1
		}
	}
	if start < len(data) {
		lines = append(lines, string(data[start:]))
	}
	return lines
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimBlanksLeft(s string) string {
	for len(s) > 0 && isBlank(s[0]) {
		s = s[1:]
	}
	return s
}

func oddTrailingBackslashes(s string) bool {
	n := 0
	for j := len(s) - 1; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits one logical line into its unescaped key and value.
func splitKeyValue(line string) (string, string, error) {
	keyEnd, valueStart := len(line), len(line)
	hasSep, escaped := false, false
	for j := 0; j < len(line); j++ {
		c := line[j]
		if !escaped && (c == '=' || c == ':') {
			keyEnd, valueStart, hasSep = j, j+1, true
			break
		}
		if !escaped && isBlank(c) {
			keyEnd, valueStart = j, j+1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	key, err := unescape(line[:keyEnd])
	if err != nil {
		return "", "", fmt.Errorf("key: %w", err)
	}
	value, err := unescape(line[valueStart:])
	if err != nil {
		return "", "", fmt.Errorf("value of %q: %w", key, err)
	}
	return key, value, nil
}

// unescape decodes the backslash escapes of a properties key or value.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	var units []uint16 // pending UTF-16 code units from \u escapes
	flush := func() {
		if len(units) > 0 {
			b.WriteString(string(utf16.Decode(units)))
			units = units[:0]
		}
	}
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c != '\\' {
			flush()
			b.WriteByte(c)
			continue
		}
		j++
		if j >= len(s) {
			break // a lone trailing backslash stands for nothing
		}
		switch c = s[j]; c {
		case 'u':
			if j+4 >= len(s) {
				return "", fmt.Errorf(`malformed \uXXXX escape %q: need 4 hex digits`, s[j-1:])
			}
			var u uint16
			for k := 1; k <= 4; k++ {
				d, ok := hexDigit(s[j+k])
				if !ok {
					return "", fmt.Errorf(`malformed \uXXXX escape %q: need 4 hex digits`, s[j-1:j+5])
				}
				u = u<<4 | d
			}
			units = append(units, u)
			j += 4
			continue
		case 't':
			c = '\t'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 'f':
			c = '\f'
		}
		flush()
		b.WriteByte(c)
	}
	flush()
	return b.String(), nil
}

func hexDigit(c byte) (uint16, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint16(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint16(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint16(c-'A') + 10, true
	}
	return 0, false
}
