package checker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commitHistory: key 0 holds values 10..13 at offsets 0..3; process 0
// subscribes, polls offsets 0-2 and commits 3; then process 1 is assigned
// key 0 and polls from offset from.
func commitHistory(t *testing.T, from int) History {
	t.Helper()
	var b strings.Builder
	i := 0
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,`, i, (i+1)*1000)
		fmt.Fprintf(&b, format+"}\n", args...)
		i++
	}
	for o := 0; o < 4; o++ {
		line(`"process":2,"type":"invoke","f":"send","value":[["send",0,%d]]`, 10+o)
		line(`"process":2,"type":"ok","f":"send","value":[["send",0,[%d,%d]]]`, o, 10+o)
	}
	line(`"process":0,"type":"invoke","f":"subscribe","value":[0]`)
	line(`"process":0,"type":"ok","f":"subscribe","value":[0]`)
	line(`"process":0,"type":"invoke","f":"poll","value":[["poll"]]`)
	line(`"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[[0,10],[1,11],[2,12]]}]],"rebalance-log":[{"keys":[0]}],"committed":{"0":3}`)
	line(`"process":1,"type":"invoke","f":"subscribe","value":[0]`)
	line(`"process":1,"type":"ok","f":"subscribe","value":[0]`)
	line(`"process":1,"type":"invoke","f":"poll","value":[["poll"]]`)
	var polls []string
	for o := from; o < 4; o++ {
		polls = append(polls, fmt.Sprintf("[%d,%d]", o, 10+o))
	}
	line(`"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[%s]}]],"rebalance-log":[{"keys":[0]}]`, strings.Join(polls, ","))
	h, err := NewReader(strings.NewReader(b.String())).ReadAll()
	require.NoError(t, err)
	return h
}

// TestLostCommit: the consumer newly assigned key 0 resumes at the
// committed offset 3 (valid), or after it; going back to 1 after the
// commit of 3 was acknowledged is lost-commit, which subscribe mode does
// not allow (unlike the nonmonotonic-poll it also is to Jepsen).
func TestLostCommit(t *testing.T) {
	for _, from := range []int{3, 1} {
		res := Analyze(context.Background(), commitHistory(t, from), Options{Mode: ModeSubscribe})
		if from == 3 {
			assert.Equal(t, Valid, res.Valid)
			assert.NotContains(t, res.Anomalies, AnomalyLostCommit)
			continue
		}
		assert.Equal(t, Invalid, res.Valid)
		require.Contains(t, res.Anomalies, AnomalyLostCommit)
		a := res.Anomalies[AnomalyLostCommit]
		assert.False(t, a.Allowed)
		assert.Equal(t, 1, a.Count)
		assert.Equal(t, []int64{3, 1}, a.Examples[0].Offsets)
		assert.Equal(t, []int64{11, 15}, a.Examples[0].Ops, "the commit's op and the poll's")
	}
}
