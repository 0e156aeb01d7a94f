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

	"github.com/faultline/faultline/internal/testutil"
)

// TestPageRendersWithoutScriptErrorsInChromium opens the failing testdata
// run's page in headless Chromium (Debian's chromium) and fails on any
// uncaught script error it logs. Where Chromium is not installed it is
// skipped, saying how to install it.
func TestPageRendersWithoutScriptErrorsInChromium(t *testing.T) {
	bin := chromium(t)
	dom := renderInChromium(t, bin, FileReport, []byte(render(t, leaderLossInput(t))))
	assert.Contains(t, dom, `id="story-2"`, "the page was rendered")
	assert.Contains(t, dom, `aria-label="fault timeline`, "with its fault timeline")
}

// TestTimelinePageRendersWithoutScriptErrorsInChromium does the same for
// timeline.html, and checks its legend script hides a series on click.
func TestTimelinePageRendersWithoutScriptErrorsInChromium(t *testing.T) {
	bin := chromium(t)
	page := renderTimeline(t, leaderLossInput(t))
	page = strings.Replace(page, "</body>", `<script>document.querySelector('.legend[data-series="ok"]').dispatchEvent(new MouseEvent("click"));</script></body>`, 1)
	dom := renderInChromium(t, bin, FileTimeline, []byte(page))
	assert.Contains(t, dom, `class="series off" data-series="ok"`, "the legend toggled the ok bars")
}

// TestPorcupinePageOpensAtTheFirstErrorInChromium checks in a browser that
// PorcupinePage's script selects the op where the order breaks.
func TestPorcupinePageOpensAtTheFirstErrorInChromium(t *testing.T) {
	bin := chromium(t)
	in := leaderLossInput(t)
	require.NotEmpty(t, in.Result.Visualizations)
	for _, viz := range in.Result.Visualizations {
		dom := renderInChromium(t, bin, "linear.html", PorcupinePage(viz))
		assert.Contains(t, dom, `class="history-rect selected"`, "porcupine opened at its first error")
		break
	}
}

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testutil.Missing(t, "headless Chromium not found: the page's scripts are not run in a browser; install it with `make deps` (or `sudo apt-get install -y chromium`)")
	return ""
}

// renderInChromium loads page in headless Chromium, fails the test on any
// script error it logs, and returns the DOM once the scripts have run.
func renderInChromium(t *testing.T, bin, name string, page []byte) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, page, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=5000", "--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") && (strings.Contains(line, "Uncaught") || strings.Contains(line, "Error")) {
			t.Errorf("script error in %s: %s", name, line)
		}
	}
	return string(dom)
}
