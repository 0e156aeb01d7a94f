package reports

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/checker"
)

func TestPorcupinePageOpensAtTheFirstError(t *testing.T) {
	h, err := checker.ReadHistory(filepath.Join("..", "checker", "testdata", "nonlinearizable.jsonl"))
	require.NoError(t, err)
	res := checker.Analyze(context.Background(), h, checker.Options{})
	require.NotEmpty(t, res.Visualizations)
	for _, viz := range res.Visualizations {
		page := string(PorcupinePage(viz))
		require.Contains(t, page, `id="jump-link"`, "porcupine's page has the link the script follows")
		script := strings.Index(page, "jump.dispatchEvent(new MouseEvent('click'))")
		require.Greater(t, script, 0)
		assert.Less(t, strings.Index(page, "render(data)"), script, "the jump runs after porcupine has drawn")
		assert.Less(t, script, strings.LastIndex(page, "</body>"))
		assert.Equal(t, len(viz)+len(openAtFirstError), len(page), "nothing else changes")
	}
}
