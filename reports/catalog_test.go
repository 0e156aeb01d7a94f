package reports

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryCheckerAnomalyIsExplained: each Anomaly* constant of package
// checker has an entry in anomalyCatalog, so the report explains every
// anomaly the checker can name (a new one falls back to "this report has
// no description of it" otherwise).
func TestEveryCheckerAnomalyIsExplained(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), "../checker", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	names := map[string]string{}
	for _, f := range pkgs["checker"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Anomaly") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					names[id.Name] = v
				}
			}
			return true
		})
	}
	require.NotEmpty(t, names)
	for id, name := range names {
		assert.Contains(t, anomalyByName, name, "checker.%s (%q) has no entry in anomalyCatalog", id, name)
	}
}
