package faultfs

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	root Ino = 1
	a    Ino = 2
	b    Ino = 3
)

func planLines(plan []Action) []string {
	out := []string{}
	for _, act := range plan {
		out = append(out, act.String())
	}
	return out
}

// stageAndUnlink removes name from dir as the adapter does.
func stageAndUnlink(m *Model, dir Ino, name string) {
	if ino, need := m.NeedStage(dir, name); need {
		m.Staged(ino)
	}
	m.Unlink(dir, name)
}

func TestModelPowerLossPlans(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(m *Model)
		plan []string
	}{
		{
			name: "an unsynced append is dropped",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 4)
				m.Write(a, 4, []byte("xy"), nil)
			},
			plan: []string{"truncate /a 4"},
		},
		{
			name: "a synced append is kept",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 4)
				m.Write(a, 4, []byte("xy"), nil)
				m.Fsync(a)
			},
			plan: []string{},
		},
		{
			name: "an unsynced overwrite puts the durable bytes back",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 10)
				require.Equal(t, []Range{{2, 5}}, m.ToSave(a, 2, 5))
				m.Write(a, 2, []byte("XYZ"), []Span{{2, []byte("234")}})
				require.Empty(t, m.ToSave(a, 3, 4), "bytes saved once are not saved again")
				m.Write(a, 3, []byte("Q"), nil)
			},
			plan: []string{`write /a 2 "234"`, "truncate /a 10"},
		},
		{
			name: "a shrinking truncation is undone",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 10)
				require.Equal(t, []Range{{3, 10}}, m.ToSaveTruncate(a, 3))
				m.Truncate(a, 3, []Span{{3, []byte("3456789")}})
			},
			plan: []string{`write /a 3 "3456789"`, "truncate /a 10"},
		},
		{
			name: "a file created without a directory fsync is lost, though its data was synced",
			ops: func(m *Model) {
				m.Create(root, "n", b, false)
				m.Write(b, 0, []byte("data"), nil)
				m.Fsync(b)
			},
			plan: []string{"move /n <stage>/3", "remove-all <stage>/3"},
		},
		{
			name: "a file named durably but never synced is empty",
			ops: func(m *Model) {
				m.Create(root, "n", b, false)
				m.Fsync(root)
				m.Write(b, 0, []byte("data"), nil)
			},
			plan: []string{"truncate /n 0"},
		},
		{
			name: "a rename over a durable file without a directory fsync brings the old file back",
			ops: func(m *Model) {
				m.Learn(root, "cp", a, false, 3)
				m.Create(root, "cp.tmp", b, false)
				m.Write(b, 0, []byte("new"), nil)
				m.Fsync(b)
				ino, need := m.NeedStage(root, "cp")
				require.True(t, need)
				require.Equal(t, a, ino)
				m.Staged(a)
				m.Rename(root, "cp.tmp", root, "cp")
			},
			plan: []string{"move /cp <stage>/3", "move <stage>/2 /cp", "remove-all <stage>/3"},
		},
		{
			name: "a rename made durable by a directory fsync is kept",
			ops: func(m *Model) {
				m.Learn(root, "cp", a, false, 3)
				m.Create(root, "cp.tmp", b, false)
				m.Write(b, 0, []byte("new"), nil)
				m.Fsync(b)
				stageAndUnlink(m, root, "cp.tmp")
				m.Fsync(root)
			},
			plan: []string{},
		},
		{
			name: "an unlink without a directory fsync is undone",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 1)
				stageAndUnlink(m, root, "a")
			},
			plan: []string{"move <stage>/2 /a"},
		},
		{
			name: "an rmdir without a directory fsync is undone",
			ops: func(m *Model) {
				m.Learn(root, "d", a, true, 0)
				stageAndUnlink(m, root, "d")
			},
			plan: []string{"move <stage>/2 /d"},
		},
		{
			name: "a directory rename without an fsync is undone with what it holds",
			ops: func(m *Model) {
				m.Learn(root, "topic-0", a, true, 0)
				m.Learn(a, "00.log", b, false, 3)
				m.Rename(root, "topic-0", root, "topic-0.delete")
				m.Write(b, 3, []byte("more"), nil)
			},
			plan: []string{"move /topic-0.delete <stage>/2", "move <stage>/2 /topic-0", "truncate /topic-0/00.log 3"},
		},
		{
			name: "a new directory whose parent was never fsynced is lost with its durable contents",
			ops: func(m *Model) {
				m.Create(root, "d", a, true)
				m.Create(a, "f", b, false)
				m.Fsync(b)
				m.Fsync(a)
			},
			plan: []string{"move /d <stage>/2", "remove-all <stage>/2"},
		},
		{
			name: "a rename across directories with only the new one fsynced leaves both names",
			ops: func(m *Model) {
				m.Learn(root, "d1", 4, true, 0)
				m.Learn(root, "d2", 5, true, 0)
				m.Learn(4, "f", a, false, 1)
				m.Rename(4, "f", 5, "g")
				m.Fsync(5)
			},
			plan: []string{"link /d2/g /d1/f"},
		},
		{
			name: "a new hard link without a directory fsync is lost, the durable name stays",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 1)
				m.Link(root, "b", a)
			},
			plan: []string{"move /b <stage>/2", "remove <stage>/2"},
		},
		{
			name: "fsyncgate: the data of a failed fsync never becomes durable, later data does",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 4)
				m.Write(a, 4, []byte("lost"), nil)
				m.FsyncFailed(a)
				m.Write(a, 8, []byte("later"), nil)
				m.Fsync(a)
			},
			plan: []string{`write /a 4 "\x00\x00\x00\x00"`, "truncate /a 13"},
		},
		{
			name: "fsyncgate: a rewrite after the failed fsync makes that range durable again",
			ops: func(m *Model) {
				m.Learn(root, "a", a, false, 8)
				m.Write(a, 0, []byte("LOST"), []Span{{0, []byte("0123")}})
				m.FsyncFailed(a)
				m.Write(a, 2, []byte("ok"), nil)
				m.Fsync(a)
			},
			plan: []string{`write /a 0 "01"`, "truncate /a 8"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModel(root)
			tc.ops(m)
			assert.Equal(t, tc.plan, planLines(m.PowerLoss(PowerSpec{})))
			assert.Equal(t, planLines(nil), planLines(m.PowerLoss(PowerSpec{})), "after a power loss everything is durable")
		})
	}
}

func TestModelUnlinkMadeDurableFreesTheStagedFile(t *testing.T) {
	m := NewModel(root)
	m.Learn(root, "a", a, false, 1)
	stageAndUnlink(m, root, "a")
	assert.Empty(t, m.TakeGarbage(), "a durable name still refers to it")
	m.Fsync(root)
	assert.Equal(t, []Ino{a}, m.TakeGarbage())
	assert.False(t, m.Known(a))
	assert.Empty(t, planLines(m.PowerLoss(PowerSpec{})))
}

func TestModelUnlinkOfAnUndurableFileNeedsNoStage(t *testing.T) {
	m := NewModel(root)
	m.Create(root, "n", b, false)
	_, need := m.NeedStage(root, "n")
	assert.False(t, need)
	m.Unlink(root, "n")
	assert.False(t, m.Known(b))
	assert.Empty(t, planLines(m.PowerLoss(PowerSpec{})))
}

// threeWrites is a durable empty file a with three unsynced 1000-byte
// writes of 'x', 'y', 'z'.
func threeWrites() *Model {
	m := NewModel(root)
	m.Learn(root, "a", a, false, 0)
	for i, c := range []byte("xyz") {
		m.Write(a, int64(i*1000), bytes.Repeat([]byte{c}, 1000), nil)
	}
	return m
}

func TestModelCountsUnsyncedWrites(t *testing.T) {
	m := threeWrites()
	files, n := m.Unsynced()
	assert.Equal(t, 1, files)
	assert.Equal(t, int64(3000), n)
	m.Fsync(a)
	files, n = m.Unsynced()
	assert.Zero(t, files)
	assert.Zero(t, n)
}

func TestModelTornWriteIsCutAtABlockBoundaryInsideTheLastWrite(t *testing.T) {
	for seed := range int64(20) {
		plan := threeWrites().PowerLoss(PowerSpec{Torn: true, BlockBytes: 512, Seed: seed})
		require.Len(t, plan, 4, "truncate to the durable size, then the three writes")
		assert.Equal(t, "truncate /a 0", plan[0].String())
		assert.Len(t, plan[1].Data, 1000)
		assert.Len(t, plan[2].Data, 1000)
		last := plan[3]
		end := last.Off + int64(len(last.Data))
		assert.Equal(t, int64(2000), last.Off)
		assert.Contains(t, []int64{2048, 2560}, end, "cut at a 512-byte boundary strictly inside [2000, 3000)")
		assert.Equal(t, planLines(plan), planLines(threeWrites().PowerLoss(PowerSpec{Torn: true, BlockBytes: 512, Seed: seed})), "a seed replays")
	}
}

func TestModelTornWriteInsideOneBlockDoesNotPersist(t *testing.T) {
	m := NewModel(root)
	m.Learn(root, "a", a, false, 0)
	m.Write(a, 0, []byte("abc"), nil)
	assert.Equal(t, []string{"truncate /a 0"}, planLines(m.PowerLoss(PowerSpec{Torn: true})))
}

func TestModelReorderPersistsASeededSubsetInOrder(t *testing.T) {
	subsets := map[string]bool{}
	for seed := range int64(40) {
		plan := threeWrites().PowerLoss(PowerSpec{Reorder: true, Seed: seed})
		require.Equal(t, "truncate /a 0", plan[0].String())
		key := ""
		for _, act := range plan[1:] {
			require.Equal(t, WriteAt, act.Kind)
			key += string(act.Data[0])
		}
		subsets[key] = true
		assert.Equal(t, planLines(plan), planLines(threeWrites().PowerLoss(PowerSpec{Reorder: true, Seed: seed})), "a seed replays")
	}
	assert.Len(t, subsets, 8, "every subset of the three writes shows up over 40 seeds, not only prefixes")
	for s := range subsets {
		assert.Contains(t, []string{"", "x", "y", "z", "xy", "xz", "yz", "xyz"}, s, "applied in their order")
	}
}

func TestModelIgnoresWhatItNeverLearned(t *testing.T) {
	m := NewModel(root)
	m.Write(a, 0, []byte("x"), nil)
	m.Truncate(a, 0, nil)
	m.Fsync(a)
	m.Unlink(root, "a")
	m.Rename(root, "a", root, "b")
	assert.Empty(t, planLines(m.PowerLoss(PowerSpec{})))
}
