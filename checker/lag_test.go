package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRealtimeLag(t *testing.T) {
	// Keys :k and :j become 0 and 1. Each poll's lag is how long before its
	// invoke the offset after its process's position was known to exist.
	h, _, err := ReadEDNHistory(strings.NewReader(`
{:time 0 :process 0 :type :invoke :f :assign :value [:k]}
{:time 1 :process 0 :type :ok :f :assign :value [:k]}
{:time 2 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 3 :process 0 :type :ok :f :poll :value [[:poll {:k []}]]}
{:time 4 :process 1 :type :invoke :f :send :value [[:send :k :a]]}
{:time 5 :process 1 :type :ok :f :send :value [[:send :k [0 :a]]]}
{:time 8 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 9 :process 0 :type :ok :f :poll :value [[:poll {:k []}]]}
{:time 10 :process 1 :type :invoke :f :send :value [[:send :k :b] [:send :k :c]]}
{:time 11 :process 1 :type :ok :f :send :value [[:send :k [1 :b]] [:send :k [2 :c]]]}
{:time 12 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 13 :process 0 :type :ok :f :poll :value [[:poll {:k [[0 :a]]}]]}
{:time 14 :process 0 :type :invoke :f :assign :value [:k :j] :seek-to-beginning? true}
{:time 15 :process 0 :type :ok :f :assign :value [:k :j] :seek-to-beginning? true}
{:time 16 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 17 :process 0 :type :ok :f :poll :value [[:poll {:j []}]]}
{:time 18 :process 0 :type :invoke :f :subscribe :value [:k]}
{:time 19 :process 0 :type :ok :f :subscribe :value [:k]}
{:time 20 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 21 :process 0 :type :ok :f :poll :value [[:poll {:k [[1 :b] [2 :c]]}]]}
{:time 22 :process 2 :type :invoke :f :txn :value [[:send :j :z]]}
{:time 23 :process 2 :type :info :f :txn :value [[:send :j [5 :z]]]}
{:time 24 :process 0 :type :invoke :f :poll :value [[:poll]]}
{:time 25 :process 0 :type :ok :f :poll :value [[:poll {}]]}
{:time 26 :process 3 :type :invoke :f :assign :value [:j]}
{:time 27 :process 3 :type :ok :f :assign :value [:j]}
{:time 28 :process 3 :type :invoke :f :poll :value [[:poll]]}
{:time 29 :process 3 :type :ok :f :poll :value [[:poll {:j []}]]}`))
	require.NoError(t, err)
	var got []RealtimeLag
	realtimeLags(h, pair(h), func(l RealtimeLag) { got = append(got, l) })
	assert.Equal(t, []RealtimeLag{
		{Time: 2, Process: 0, Key: 0, LagNs: 0},  // nothing sent yet
		{Time: 8, Process: 0, Key: 0, LagNs: 3},  // offset 0 existed from 5
		{Time: 12, Process: 0, Key: 0, LagNs: 1}, // offset 1 existed from 11
		// From 14 process 0 rereads from the beginning on purpose (as the
		// final reads do): no lag of it counts (Jepsen's would be 11 at 16).
		{Time: 28, Process: 3, Key: 1, LagNs: 5}, // an info send's offset counts from 23
	}, got)

	res := Analyze(context.Background(), h, Options{SkipLinear: true})
	assert.Equal(t, &RealtimeLag{Time: 28, Process: 3, Key: 1, LagNs: 5}, res.Perf.WorstRealtimeLag)
}

// TestRealtimeLagFromTheResumedOffset: a consumer that resumed at the
// group's committed offset (its assign's Committed) is at the tail when
// that offset is the next to be written, not behind offset 0.
func TestRealtimeLagFromTheResumedOffset(t *testing.T) {
	var b strings.Builder
	line := historyLines(&b)
	line(`"process":1,"type":"invoke","f":"send","value":[["send",0,10],["send",0,11]]`)
	line(`"process":1,"type":"ok","f":"send","value":[["send",0,[0,10]],["send",0,[1,11]]]`)
	line(`"process":0,"type":"invoke","f":"assign","value":[0]`)
	line(`"process":0,"type":"ok","f":"assign","value":[0],"committed":{"0":2}`)
	line(`"process":0,"type":"invoke","f":"poll","value":[["poll"]]`)
	line(`"process":0,"type":"ok","f":"poll","value":[["poll",{"0":[]}]]`)
	h, err := NewReader(strings.NewReader(b.String())).ReadAll()
	require.NoError(t, err)
	var got []RealtimeLag
	realtimeLags(h, pair(h), func(l RealtimeLag) { got = append(got, l) })
	assert.Equal(t, []RealtimeLag{{Time: 5000, Process: 0, Key: 0, LagNs: 0}}, got)
}

func TestRealtimeLagNeedsAPoll(t *testing.T) {
	h, _, err := ReadEDNHistory(strings.NewReader(`{:process 0 :type :invoke :f :send :value [[:send :k :a]]}
{:process 0 :type :ok :f :send :value [[:send :k [1000000000000 :a]]]}`))
	require.NoError(t, err)
	assert.Nil(t, worstRealtimeLag(h, pair(h)))
}
