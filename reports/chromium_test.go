package reports

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPageRendersWithoutScriptErrorsInChromium opens the failing testdata
// run's page in headless Chromium (Debian's chromium) and fails on any
// uncaught script error it logs. Where Chromium is not installed it is
// skipped, saying how to install it.
func TestPageRendersWithoutScriptErrorsInChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("headless Chromium not found (apt-get install chromium): the page's script is not run in a browser")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, FileReport)
	require.NoError(t, os.WriteFile(path, []byte(render(t, leaderLossInput(t))), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	assert.Contains(t, string(dom), `id="story-2"`, "the page was rendered")
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") && (strings.Contains(line, "Uncaught") || strings.Contains(line, "Error")) {
			t.Errorf("script error in the page: %s", line)
		}
	}
}
