package raftq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/faultline/faultline/broker/storage"
)

// QuorumStateFile is the name of the file holding raft's hard state in the
// metadata partition dir, as Kafka names its KRaft election state.
const QuorumStateFile = "quorum-state"

// quorumStateVersion is the data_version this package writes and reads.
const quorumStateVersion = 0

// quorumStateBytesMax bounds how much of a quorum-state file is read.
const quorumStateBytesMax = 1 << 20

// hardState is raft's durable state: the current term, the vote cast in it
// and the commit index known when it was written.
type hardState struct {
	Term   uint64
	Vote   uint64 // raft id, 0 = none
	Commit uint64
}

type quorumVoter struct {
	VoterID int32 `json:"voterId"`
}

// quorumStateJSON is the file format: Kafka's field names where they mean
// the same thing (leaderEpoch is raft's term, votedId the node voted for in
// it, -1 for none), plus commitIndex, the raft commit index at the time of
// writing (it may lag: raft relearns it from the leader).
type quorumStateJSON struct {
	ClusterID     string        `json:"clusterId"`
	LeaderEpoch   uint64        `json:"leaderEpoch"`
	VotedID       int32         `json:"votedId"`
	CommitIndex   uint64        `json:"commitIndex"`
	CurrentVoters []quorumVoter `json:"currentVoters"`
	DataVersion   int           `json:"data_version"`
}

func encodeQuorumState(hs hardState, clusterID string, voters []int32) []byte {
	st := quorumStateJSON{
		ClusterID:   clusterID,
		LeaderEpoch: hs.Term,
		VotedID:     -1,
		CommitIndex: hs.Commit,
		DataVersion: quorumStateVersion,
	}
	if hs.Vote != 0 {
		st.VotedID = NodeID(hs.Vote)
	}
	for _, v := range voters {
		st.CurrentVoters = append(st.CurrentVoters, quorumVoter{VoterID: v})
	}
	b, _ := json.Marshal(st) // a struct of plain fields always marshals
	return append(b, '\n')
}

// decodeQuorumState parses a quorum-state file. It never panics on any
// input.
func decodeQuorumState(b []byte) (hardState, error) {
	var st quorumStateJSON
	st.VotedID = -1
	if err := json.Unmarshal(b, &st); err != nil {
		return hardState{}, fmt.Errorf("parse %s: %w", QuorumStateFile, err)
	}
	if st.DataVersion != quorumStateVersion {
		return hardState{}, fmt.Errorf("parse %s: data_version %d, this broker reads %d", QuorumStateFile, st.DataVersion, quorumStateVersion)
	}
	if st.VotedID < -1 {
		return hardState{}, fmt.Errorf("parse %s: votedId %d", QuorumStateFile, st.VotedID)
	}
	hs := hardState{Term: st.LeaderEpoch, Commit: st.CommitIndex}
	if st.VotedID >= 0 {
		hs.Vote = RaftID(st.VotedID)
	}
	if hs.Vote != 0 && hs.Term == 0 {
		return hardState{}, fmt.Errorf("parse %s: a vote in epoch 0", QuorumStateFile)
	}
	return hs, nil
}

// readQuorumState loads the hard state of dir; a missing file is the state
// of a node that never took part in an election.
func readQuorumState(fs storage.FS, dir string) (hardState, bool, error) {
	path := filepath.Join(dir, QuorumStateFile)
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return hardState{}, false, nil
	}
	if err != nil {
		return hardState{}, false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, quorumStateBytesMax+1))
	if err != nil {
		return hardState{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > quorumStateBytesMax {
		return hardState{}, false, fmt.Errorf("read %s: larger than %d bytes", path, quorumStateBytesMax)
	}
	hs, err := decodeQuorumState(b)
	if err != nil {
		return hardState{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return hs, true, nil
}

// writeFileDurably writes name+".tmp", fsyncs it, renames it over name and
// fsyncs the directory: a crash leaves the old or the new content.
func writeFileDurably(fs storage.FS, name string, data []byte) error {
	tmp := name + ".tmp"
	if err := writeSynced(fs, tmp, data); err != nil {
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("fsync dir of %s: %w", name, err)
	}
	return nil
}

// writeSynced creates (or truncates) name, writes data and fsyncs it.
func writeSynced(fs storage.FS, name string, data []byte) error {
	f, err := fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

func writeQuorumState(fs storage.FS, dir string, hs hardState, clusterID string, voters []int32) error {
	return writeFileDurably(fs, filepath.Join(dir, QuorumStateFile), encodeQuorumState(hs, clusterID, slices.Sorted(slices.Values(voters))))
}
