package testspec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
)

func TestDecodeReadsWhatMarshalWrites(t *testing.T) {
	nem, err := nemesis.ParseSpec("kill,partition")
	require.NoError(t, err)
	in := Spec{Name: "x", Nemesis: nem, Nodes: 3, TimeLimit: Duration(90 * time.Second), Seed: 7,
		Acks: workloads.AcksAll, BrokerConfig: map[string]string{"a": "b"}, PartitionsPerTopic: 4}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"time-limit":"1m30s"`)
	out, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestDecodeRefusesForeignShapes(t *testing.T) {
	_, err := Decode([]byte(`{"TimeLimit":60000000000}`))
	assert.Error(t, err, "an unknown field")
	_, err = Decode([]byte(`{"time-limit":30}`))
	assert.Error(t, err, "a duration that is not a Go duration string")
}
