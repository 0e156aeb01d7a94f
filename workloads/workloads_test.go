package workloads

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcksZeroIsNotUnset(t *testing.T) {
	var unset Acks
	assert.False(t, unset.IsSet())
	assert.Equal(t, AcksAll, unset.OrDefault(), "unset means Kafka's default, all")
	assert.True(t, AcksNone.IsSet())
	assert.NotEqual(t, unset, AcksNone)
	assert.Equal(t, AcksNone, AcksNone.OrDefault())
	for n, want := range map[int]Acks{-1: AcksAll, 1: AcksLeader, 0: AcksNone} {
		got, err := AcksOf(n)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, n, got.Int())
	}
	_, err := AcksOf(2)
	assert.EqualError(t, err, "must be -1 (all), 0 or 1, got 2")
}

func TestAcksJSON(t *testing.T) {
	for _, a := range []Acks{AcksAll, AcksLeader, AcksNone, {}} {
		b, err := json.Marshal(a)
		require.NoError(t, err)
		var back Acks
		require.NoError(t, json.Unmarshal(b, &back), string(b))
		assert.Equal(t, a, back, string(b))
	}
	b, _ := json.Marshal(AcksNone)
	assert.Equal(t, "0", string(b))
	var a Acks
	assert.ErrorContains(t, json.Unmarshal([]byte("3"), &a), "got 3")
	assert.Error(t, json.Unmarshal([]byte(`"all"`), &a))
}

func TestRegistryLookupNamesTheRegistered(t *testing.T) {
	reg := Registry{"queue": nil, "bank": nil}
	assert.Equal(t, []string{"bank", "queue"}, reg.Names())
	_, err := reg.Lookup("register")
	assert.EqualError(t, err, `unknown workload "register" (known: bank, queue)`)
	_, err = reg.Lookup("queue")
	assert.NoError(t, err)
}
