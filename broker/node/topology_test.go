package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faultline/faultline/broker/config"
)

// TestQuorumVoters: the voters each controller configuration makes (a
// combined node that lists none is the only voter, on its controller
// listener), and the configurations refused, with the key to fix named.
func TestQuorumVoters(t *testing.T) {
	base := map[string]string{
		"node.id":                   "1",
		"listeners":                 "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"controller.listener.names": "CONTROLLER",
		"log.dirs":                  t.TempDir(),
	}
	for _, tc := range []struct {
		name   string
		props  map[string]string
		want   map[int32]string
		errHas string
	}{
		{"combined, only voter", map[string]string{"process.roles": "broker,controller", "controller.quorum.voters": "1@127.0.0.1:9093"}, map[int32]string{1: "127.0.0.1:9093"}, ""},
		{"combined, bootstrap servers only", map[string]string{"process.roles": "broker,controller", "controller.quorum.bootstrap.servers": "localhost:9093"}, map[int32]string{1: "127.0.0.1:9093"}, ""},
		{"combined, no voters", map[string]string{"process.roles": "broker,controller"}, nil, "controller.quorum"},
		{"combined, one of three", map[string]string{"process.roles": "broker,controller", "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"}, map[int32]string{1: "127.0.0.1:9093", 2: "127.0.0.1:9094", 3: "127.0.0.1:9095"}, ""},
		{"controller, only voter", map[string]string{"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "1@127.0.0.1:9093"}, map[int32]string{1: "127.0.0.1:9093"}, ""},
		{"controller, bootstrap servers only", map[string]string{"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.bootstrap.servers": "localhost:9093"}, nil, "a controller-only node must list the voters"},
		{"broker listed as voter", map[string]string{"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092", "controller.quorum.voters": "1@127.0.0.1:9093"}, nil, "is a voter, but this node is broker-only"},
		{"controller not a voter", map[string]string{"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "2@127.0.0.1:9094"}, nil, "is not among the voters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range base {
				props[k] = v
			}
			for k, v := range tc.props {
				props[k] = v
			}
			cfg, _, err := config.FromMap(props)
			if err != nil {
				// Some shapes are refused by the configuration itself.
				require.NotEmpty(t, tc.errHas, "config: %v", err)
				assert.Contains(t, err.Error(), tc.errHas)
				return
			}
			got, err := quorumVoters(cfg)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestRaftTickFollowsElectionTimeout: controller.quorum.election.timeout.ms
// is raft's election timeout, in ticks of a tenth of it.
func TestRaftTickFollowsElectionTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms   string
		tick time.Duration
	}{{"1000", 100 * time.Millisecond}, {"500", 50 * time.Millisecond}, {"3000", 300 * time.Millisecond}, {"20", 10 * time.Millisecond}} {
		cfg, _, err := config.FromMap(map[string]string{
			"process.roles": "broker,controller", "node.id": "1",
			"listeners":                 "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
			"controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
			"log.dirs": t.TempDir(), "controller.quorum.election.timeout.ms": tc.ms,
		})
		require.NoError(t, err)
		assert.Equal(t, tc.tick, raftTick(cfg), "election timeout %s ms", tc.ms)
	}
}
