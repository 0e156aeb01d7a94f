package reports

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

// writeRun stores a run as the harness does and returns its directory.
func writeRun(t *testing.T, store, test, stamp string, in Input, withHistory bool) string {
	t.Helper()
	dir := filepath.Join(store, test, stamp)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "nodes", "n1"), 0o755))
	res, err := json.Marshal(in.Result)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileResults), res, 0o644))
	spec := `{"name": "` + test + `", "workload": "queue", "nemesis": "kill,partition", "nodes": 3, "seed": 7,
		"time-limit": "90s", "broker-config": {"min.insync.replicas": "2"}, "partitions-per-topic": 3,
		"acks": -1, "replication-factor": 3, "idempotent": true}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileSpec), []byte(spec), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nodes", "n1", "broker.log"), []byte("Kafka broker 1 is ready to serve requests\n"), 0o644))
	if withHistory {
		require.NoError(t, checker.WriteHistory(filepath.Join(dir, FileHistory), in.History))
	}
	return dir
}

func TestRenderDirWritesReportAndJUnit(t *testing.T) {
	store := t.TempDir()
	dir := writeRun(t, store, "queue-kill", "20261129T150000Z", invalidInput(), true)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, DirPorcupine), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, DirPorcupine, "key 2.html"), []byte("<html></html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, LinearVisualizationFile(5)), []byte("<html></html>"), 0o644))

	require.NoError(t, RenderDir(dir))
	page, err := os.ReadFile(filepath.Join(dir, FileReport))
	require.NoError(t, err)
	s := string(page)
	contains(t, s, "INVALID: 3 acknowledged writes were lost on key 2 (t0-2) after the nemesis killed n1 at 41.2 s")
	contains(t, s, `href="nodes/n1/broker.log"`)
	contains(t, s, `src="porcupine/key%202.html"`)
	contains(t, s, `<a href="linear-5.html">key 5 (t1-2)</a>`)
	contains(t, s, `href="test.json"`)
	contains(t, s, `href="history.jsonl"`)
	contains(t, s, "kill, partition")
	contains(t, s, "1m30s")
	contains(t, s, "<div><span>acks</span>-1</div>")
	contains(t, s, "<div><span>replication factor</span>3</div>")
	contains(t, s, "<tr><th>idempotent</th><td>true</td></tr>")
	contains(t, s, `<td class="value">min.insync.replicas</td><td class="value">2</td>`)
	lacks(t, s, "Notes on this report")
	checkSVGs(t, s)

	junit, err := os.ReadFile(filepath.Join(dir, FileJUnit))
	require.NoError(t, err)
	contains(t, string(junit), `<testcase name="queue" classname="faultline.queue-kill"`)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasSuffix(e.Name(), ".tmp"), "temporary file %s left behind", e.Name())
	}
}

func TestRenderDirWithoutHistoryOrSpec(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t", "run1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	res, err := json.Marshal(unknownInput().Result)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileResults), res, 0o644))
	require.NoError(t, RenderDir(dir))
	page, err := os.ReadFile(filepath.Join(dir, FileReport))
	require.NoError(t, err)
	s := string(page)
	contains(t, s, "UNKNOWN: the linearizable checker could not decide")
	contains(t, s, "history.jsonl is missing")
	contains(t, s, "test.json is missing")
	contains(t, s, "faultline report: t/run1")
}

func TestRenderDirRejectsMissingOrBadResults(t *testing.T) {
	dir := t.TempDir()
	err := RenderDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "results.json")
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileResults), []byte(`{"valid": "maybe"}`), 0o644))
	err = RenderDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "parse results.json")
}

func TestRenderDirNotesBrokenHistory(t *testing.T) {
	store := t.TempDir()
	dir := writeRun(t, store, "t", "r", validInput(), false)
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileHistory), []byte("{not json\n"), 0o644))
	require.NoError(t, RenderDir(dir))
	page, err := os.ReadFile(filepath.Join(dir, FileReport))
	require.NoError(t, err)
	contains(t, string(page), "history.jsonl could not be read")
}

func TestParseSpecShapes(t *testing.T) {
	s, err := ParseSpec([]byte(`{"Name":"x","Nemesis":["kill","pause"],"Nodes":["a","b"],"Seed":"12",
		"TimeLimit":60000000000,"BrokerConfig":{"acks":"all","n":3},"sub-via":"subscribe"}`))
	require.NoError(t, err)
	assert.Equal(t, "x", s.Name)
	assert.Equal(t, []string{"kill", "pause"}, s.Nemesis.Names())
	assert.Equal(t, []string{"a", "b"}, s.Nodes)
	assert.Equal(t, int64(12), s.Seed)
	assert.Equal(t, "1m0s", s.TimeLimit.String())
	assert.Equal(t, map[string]string{"acks": "all", "n": "3"}, s.BrokerConfig)
	assert.True(t, s.Subscribe)
	assert.Equal(t, "key 5", s.keyLabel(5))

	s, err = ParseSpec([]byte(`{"nodes": 2, "time_limit": 30, "nemesis": "none", "partitions": 4}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n2"}, s.Nodes)
	assert.Equal(t, "30s", s.TimeLimit.String())
	assert.Equal(t, "key 5 (t1-1)", s.keyLabel(5))

	_, err = ParseSpec([]byte(`[1,2]`))
	assert.Error(t, err)
}

func serve(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

func TestHandlerListsRunsNewestFirstAndServesReports(t *testing.T) {
	store := t.TempDir()
	killed := invalidInput()
	killed.Result.Stats.DurationNs = 61_500_000_000
	old := writeRun(t, store, "queue-kill", "20261129T150000Z", killed, true)
	require.NoError(t, RenderDir(old))
	writeRun(t, store, "queue-none", "20261129T160000Z", validInput(), true)
	require.NoError(t, os.Symlink(filepath.Join("queue-none", "20261129T160000Z"), filepath.Join(store, "latest")))
	h := Handler(store)

	rec := serve(t, h, "/")
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	iNew := strings.Index(body, "queue-none")
	iOld := strings.Index(body, "queue-kill")
	require.True(t, iNew >= 0 && iOld >= 0, body)
	assert.Less(t, iNew, iOld, "newest first")
	assert.Contains(t, body, `href="runs/queue-kill/20261129T150000Z/"`)
	assert.Contains(t, body, "lost-write: 3, duplicate: 1")
	assert.Contains(t, body, "2026-11-29 16:00:00 UTC")
	assert.Contains(t, body, "2 runs: 1 valid, 1 invalid, 0 unknown.")
	assert.Contains(t, body, `<a href="runs/latest/">Latest run</a>`)
	assert.Equal(t, 1, strings.Count(body, ">queue-none<"), "latest is not listed twice")

	broken := filepath.Join(store, "queue-broken", "20261129T140000Z")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, FileResults), []byte("{"), 0o644))
	body = serve(t, h, "/").Body.String()
	assert.Contains(t, body, `<span class="badge unknown">?</span></td><td>unexpected EOF</td>`)
	assert.Contains(t, body, `<td>kill, partition</td><td class="num">61.5 s</td>`, "the nemesis and duration of each run")
	assert.Equal(t, http.StatusInternalServerError, serve(t, h, "/runs/queue-broken/20261129T140000Z/").Code)

	rec = serve(t, h, "/runs/queue-kill/20261129T150000Z/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "INVALID: 3 acknowledged writes were lost")

	rec = serve(t, h, "/runs/queue-none/20261129T160000Z/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "VALID: no anomalies", "rendered on the fly")
	assert.Contains(t, rec.Body.String(), "rendered by `faultline serve`")

	rec = serve(t, h, "/runs/latest/")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "VALID: no anomalies")

	rec = serve(t, h, "/runs/queue-kill/20261129T150000Z/nodes/n1/broker.log")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Body.String(), "ready to serve requests")

	rec = serve(t, h, "/runs/queue-kill/20261129T150000Z")
	assert.Equal(t, http.StatusMovedPermanently, rec.Code, "a run without its slash is redirected so relative links work")

	assert.Equal(t, http.StatusNotFound, serve(t, h, "/runs/nope/").Code)
	assert.Equal(t, http.StatusNotFound, serve(t, h, "/elsewhere").Code)
}

func TestHandlerRefusesTraversal(t *testing.T) {
	parent := t.TempDir()
	store := filepath.Join(parent, "store")
	require.NoError(t, os.MkdirAll(store, 0o755))
	secret := filepath.Join(parent, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("TOP SECRET"), 0o644))
	writeRun(t, store, "t", "r", validInput(), false)
	require.NoError(t, os.Symlink(secret, filepath.Join(store, "t", "r", "leak.txt")))
	require.NoError(t, os.Symlink(parent, filepath.Join(store, "up")))
	h := Handler(store)

	for _, target := range []string{
		"/runs/../secret.txt",
		"/runs/t/../../secret.txt",
		"/runs/%2e%2e/secret.txt",
		"/runs/t%2f..%2f..%2fsecret.txt",
		"/runs/t/r/..%5c..%5csecret.txt",
		"/../secret.txt",
	} {
		rec := serve(t, h, target)
		assert.Equal(t, http.StatusBadRequest, rec.Code, target)
		assert.NotContains(t, rec.Body.String(), "TOP SECRET", target)
	}
	for _, target := range []string{"/runs/t/r/leak.txt", "/runs/up/secret.txt"} {
		rec := serve(t, h, target)
		assert.NotEqual(t, http.StatusOK, rec.Code, target)
		assert.NotContains(t, rec.Body.String(), "TOP SECRET", target)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	_, _ = io.Copy(io.Discard, rec.Body)
}

func TestLoadRunShowsWhereAReplayDisagreedWithItsRecording(t *testing.T) {
	fsys := fstest.MapFS{
		FileResults: {Data: []byte(`{"valid":true}`)},
		FileSchedule: {Data: []byte(`[{"at":1000000000,"action":"start","slot":0,"kind":"partition","mode":"lagging-then-leader",` +
			`"steps":[{"step":"kill","after":10000000000,"nodes":["n3"],"live":["n4"],"note":"replay: the live cluster disagreed"}]}]`)},
	}
	in, err := loadRun(fsys, ".", "replayed")
	require.NoError(t, err)
	assert.Contains(t, in.Notes, "partition:lagging-then-leader started at 1s, its step kill 10s in: replay: the live cluster disagreed")
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, in))
	assert.Contains(t, b.String(), "its step kill 10s in")
}
