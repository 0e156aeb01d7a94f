package workloads

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TxnIDs keeps each id once, lists them sorted, keeps the first
// TxnIDsMax, and a nil set takes nothing without failing.
func TestTxnIDs(t *testing.T) {
	var s TxnIDs
	assert.Empty(t, s.List())
	for _, id := range []string{"b", "a", "b"} {
		s.Add(id)
	}
	assert.Equal(t, []string{"a", "b"}, s.List())
	for i := range TxnIDsMax + 10 {
		s.Add(fmt.Sprintf("id-%04d", i))
	}
	assert.Len(t, s.List(), TxnIDsMax)
	assert.Contains(t, s.List(), "a", "the first ones are kept")
	s.Add("id-0000")
	s.Add(fmt.Sprintf("id-%04d", TxnIDsMax+9))
	assert.Equal(t, 12, s.Dropped(), "the ids past the bound are counted, each once")
	var none *TxnIDs
	none.Add("x")
}
