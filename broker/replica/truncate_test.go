package replica

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/faultline/faultline/broker/storage"
)

func TestEndOffsetFor(t *testing.T) {
	entries := []storage.EpochEntry{{Epoch: 1, StartOffset: 10}, {Epoch: 3, StartOffset: 50}, {Epoch: 4, StartOffset: 80}}
	cases := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{-1, -1, -1},
		{0, 0, 10},  // below every known epoch: ends where the first starts
		{1, 1, 50},  // ends where the next starts
		{2, 1, 50},  // unknown epoch in between: the largest epoch below it
		{3, 3, 80},  //
		{4, 4, 100}, // the latest ends at the LEO
		{5, -1, -1}, // newer than every known epoch
	}
	for _, c := range cases {
		e, end := EndOffsetFor(entries, c.epoch, 100)
		assert.Equal(t, []any{c.wantEpoch, c.wantEnd}, []any{e, end}, "epoch %d", c.epoch)
	}
	e, end := EndOffsetFor(nil, 1, 100)
	assert.Equal(t, []any{int32(-1), int64(-1)}, []any{e, end})
}

func TestFollowerTruncation(t *testing.T) {
	tests := []struct {
		name        string
		local       []storage.EpochEntry
		leo, hw     int64
		leaderEpoch int32
		leaderEnd   int64
		want        Truncation
	}{
		{
			// Seed 003, "Broker reintegration": broker 1 led epoch 1 and
			// wrote up to offset 1049 (LEO 1050) with the HW at 1008; broker
			// 2 took over with epoch 2 starting at 1009. Broker 1 asks
			// where its epoch 1 ended: at 1009. It truncates to 1009,
			// discarding 1009-1049.
			name:  "seed 003 reintegration",
			local: []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 500}},
			leo:   1050, hw: 1008, leaderEpoch: 1, leaderEnd: 1009,
			want: Truncation{Offset: 1009, Done: true},
		},
		{
			name:  "leader ahead: nothing to truncate",
			local: []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 500}},
			leo:   700, hw: 600, leaderEpoch: 1, leaderEnd: 900,
			want: Truncation{Offset: 700, Done: true},
		},
		{
			name:  "leader never had the follower's last epoch",
			local: []storage.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 100}},
			leo:   150, hw: 90, leaderEpoch: 1, leaderEnd: 80,
			want: Truncation{Offset: 100, Done: false},
		},
		{
			name:  "second round after the above",
			local: []storage.EpochEntry{{Epoch: 0, StartOffset: 0}},
			leo:   100, hw: 90, leaderEpoch: 0, leaderEnd: 95,
			want: Truncation{Offset: 95, Done: true},
		},
		{
			name:  "leader has no such epoch: back to the high watermark",
			local: []storage.EpochEntry{{Epoch: 5, StartOffset: 0}},
			leo:   40, hw: 30, leaderEpoch: -1, leaderEnd: -1,
			want: Truncation{Offset: 30, Done: true},
		},
		{
			name:  "follower without epochs",
			local: nil,
			leo:   40, hw: 30, leaderEpoch: 2, leaderEnd: 35,
			want: Truncation{Offset: 30, Done: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, FollowerTruncation(tc.local, tc.leo, tc.hw, tc.leaderEpoch, tc.leaderEnd))
		})
	}
}
