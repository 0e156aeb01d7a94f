package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKafkaHandlerLayout(t *testing.T) {
	var buf bytes.Buffer
	h := NewKafkaHandler(&buf, slog.LevelInfo)
	at := time.Date(2026, 11, 29, 16, 0, 0, 123_456_789, time.Local)
	logger := slog.New(h).With(ComponentKey, "LogManager")
	emit := func(l *slog.Logger, level slog.Level, msg string, args ...any) {
		if !l.Handler().Enabled(context.Background(), level) {
			return
		}
		r := slog.NewRecord(at, level, msg, 0)
		r.Add(args...)
		require.NoError(t, l.Handler().Handle(context.Background(), r))
	}

	emit(logger, slog.LevelInfo, "Loading logs from log dirs [/data]")
	emit(logger, slog.LevelWarn, "slow", "dir", "/data one", "ms", 12)
	emit(logger, slog.LevelDebug, "hidden")
	emit(logger.WithGroup("g"), slog.LevelInfo, "grouped", "k", "v", ComponentKey, "Other")

	lines := bytes.Split(bytes.TrimRight(buf.Bytes(), "\n"), []byte("\n"))
	require.Len(t, lines, 3)
	assert.Equal(t, "[2026-11-29 16:00:00,123] INFO Loading logs from log dirs [/data] (LogManager)", string(lines[0]))
	assert.Equal(t, `[2026-11-29 16:00:00,123] WARN slow dir="/data one" ms=12 (LogManager)`, string(lines[1]))
	assert.Equal(t, `[2026-11-29 16:00:00,123] INFO grouped g.k=v g.component=Other (LogManager)`, string(lines[2]))
}

func TestKafkaHandlerRealClockAndLevels(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(NewKafkaHandler(&buf, slog.LevelDebug))
	logger.Debug("d")
	logger.Error("e", ComponentKey, "KafkaServer")
	re := regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] DEBUG d\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR e \(KafkaServer\)\n$`)
	assert.Regexp(t, re, buf.String())
}

func TestRandomUUIDParses(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		s := RandomUUID()
		require.Len(t, s, 22)
		assert.NotEqual(t, byte('-'), s[0])
		_, err := ParseUUID(s)
		require.NoError(t, err)
		assert.False(t, seen[s], "duplicate uuid %s", s)
		seen[s] = true
	}
}

func TestParseUUIDRejects(t *testing.T) {
	for _, s := range []string{"", "short", "MkU3OEVBNTcwNTJENDM2Qg==", "MkU3OEVBNTcwNTJENDM2Q!", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"} {
		_, err := ParseUUID(s)
		assert.Error(t, err, s)
	}
	_, err := ParseUUID("MkU3OEVBNTcwNTJENDM2Qg")
	assert.NoError(t, err)
}

// FuzzParseUUID checks that ParseUUID never panics and that every id it
// accepts encodes back to the same text.
func FuzzParseUUID(f *testing.F) {
	f.Add("MkU3OEVBNTcwNTJENDM2Qg")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("-_-_-_-_-_-_-_-_-_-_-_")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUUID(s)
		if err != nil {
			return
		}
		assert.Equal(t, s, base64.RawURLEncoding.EncodeToString(u[:]))
	})
}
