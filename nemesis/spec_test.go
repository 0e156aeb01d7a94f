package nemesis

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSpecReadsEveryForm(t *testing.T) {
	s, err := ParseSpec("none, kill,pause:minority,partition:majorities-ring,kill:all")
	require.NoError(t, err)
	assert.Equal(t, Spec{
		{Kind: KindNone}, {Kind: KindKill}, {Kind: KindPause, Mode: TargetMinority},
		{Kind: KindPartition, Mode: PartitionRing}, {Kind: KindKill, Mode: TargetAll},
	}, s)
	assert.Equal(t, "none,kill,pause:minority,partition:majorities-ring,kill:all", s.String())
	assert.True(t, s.Has(KindPartition))
	assert.False(t, Spec{{Kind: KindKill}}.Has(KindPartition))
	assert.Equal(t, []string{"kill", "pause:minority", "partition:majorities-ring", "kill:all"}, s.Injected().Names())
	assert.Len(t, s, 5, "Injected leaves the list alone")
}

// TestParseSpecNamesTheBadPart: one error, naming the entry that is wrong.
func TestParseSpecNamesTheBadPart(t *testing.T) {
	for spec, want := range map[string]string{
		"kill,chaos":           `unknown nemesis "chaos" (known: none, kill, pause, partition, power, disk-error, disk-full, disk-slow, corrupt, stop, rolling-restart, membership, lagging-failover, packet)`,
		"partition:everything": `partition: unknown mode "everything" (known: one, halves, majorities-ring, controller, lagging-then-leader, leader-and-follower, deposed-leader-returns, leader-cut-then-killed, coordinator, clients-coordinator, coordinator-cut-then-killed)`,
		"pause:halves":         `pause: unknown mode "halves"`,
		"partition:all":        `partition: unknown mode "all"`,
		"none:one":             `none: takes no mode, got "one"`,
		"kill:":                `kill: empty mode in "kill:"`,
		"kill,,pause":          `empty entry in "kill,,pause"`,
		"":                     `empty entry in ""`,
	} {
		_, err := ParseSpec(spec)
		assert.ErrorContains(t, err, want, spec)
	}
	assert.ErrorContains(t, Spec{}.Validate(), "name at least one fault")
	assert.ErrorContains(t, Spec{{Kind: KindKill, Mode: "everyone"}}.Validate(), `kill: unknown mode "everyone"`)
	assert.NoError(t, Spec{{Kind: KindPartition, Mode: PartitionOne}, {Kind: KindKill, Mode: TargetLeaders}}.Validate())
}

func TestSpecJSONIsAListOfEntries(t *testing.T) {
	s := Spec{{Kind: KindPartition, Mode: PartitionOne}, {Kind: KindKill}}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.JSONEq(t, `["partition:one","kill"]`, string(b))
	var back Spec
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s, back)
	require.NoError(t, json.Unmarshal([]byte(`"kill,pause:one"`), &back), "one comma-separated string")
	assert.Equal(t, Spec{{Kind: KindKill}, {Kind: KindPause, Mode: TargetOne}}, back)
	assert.ErrorContains(t, json.Unmarshal([]byte(`["kill","chaos"]`), &back), `nemesis: unknown nemesis "chaos"`)
	assert.Error(t, json.Unmarshal([]byte(`7`), &back))
}

// FuzzParseSpec: whatever --nemesis says, parsing never panics, what it
// accepts is valid, and it reads back the same from its own String and
// from test.json.
func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{"none", "kill", "kill:all,pause:leaders", "partition:majorities-ring, kill", "kill,,", "x:y:z", ":", "none:one"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, list string) {
		s, err := ParseSpec(list)
		if err != nil {
			return
		}
		require.NoError(t, s.Validate())
		again, err := ParseSpec(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, again)
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back Spec
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, s, back)
		assert.Len(t, s.Faults(nil, nil), len(s))
	})
}
