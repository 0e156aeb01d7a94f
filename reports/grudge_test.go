package reports

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGrudgeSummary(t *testing.T) {
	one := []byte(`{"mode":"one","grudge":{"n1":["n3"],"n2":["n3"],"n3":["n1","n2","n4","n5"],"n4":["n3"],"n5":["n3"]}}`)
	assert.Equal(t, "n3 cut off from n1, n2, n4, n5", rawSummary(one))
	halves := []byte(`{"mode":"halves","grudge":{"n1":["n3","n4","n5"],"n2":["n3","n4","n5"],"n3":["n1","n2"],"n4":["n1","n2"],"n5":["n1","n2"]}}`)
	assert.Equal(t, "n1, n2 | n3, n4, n5", rawSummary(halves))
	ring := []byte(`{"mode":"majorities-ring","grudge":{"n1":["n3","n4"]}}`)
	assert.Equal(t, "majorities ring", rawSummary(ring))
	assert.Equal(t, "n1, n2 (leaders)", rawSummary([]byte(`{"mode":"leaders","nodes":["n1","n2"]}`)))
}
