package server

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/replica"
)

// Fetch: v4-v16
//
// Behaviour:
//   - Each partition is read with Replicas.Fetch; a topic or partition not
//     in the image is UNKNOWN_TOPIC_OR_PARTITION, an unknown topic id
//     (v13+) UNKNOWN_TOPIC_ID.
//   - Long polling: while the bytes read are fewer than MinBytes and
//     MaxWaitMillis has not passed, the request waits for
//     Replicas.Changed() and reads again. It answers at once when a
//     partition has an error, and early (with what it has) when the server
//     shuts down.
//   - MaxBytes bounds the whole response and PartitionMaxBytes each
//     partition, in whole batches, except that the first batch of the first
//     partition with data is returned even when it alone is larger
//     (Kafka's minOneMessage), so a consumer can always progress.
//   - Fetch sessions (KIP-227) are declined: the response's SessionID is 0
//     so clients send full fetches; a request naming a session gets
//     FETCH_SESSION_ID_NOT_FOUND, an epoch > 0 without a session
//     INVALID_FETCH_SESSION_EPOCH.
//   - IsolationLevel is handed to Replicas: read_committed stops at the
//     last stable offset and lists the aborted transactions overlapping
//     the records returned (from the aborted-transactions index).
//   - Followers are recognised by ReplicaID (v4-v14) or ReplicaState
//     (v15+) and passed on; DivergingEpoch (v12+) comes from Replicas.
//   - PreferredReadReplica (v11+) is -1: consumers read from leaders.
//
// Version notes: v4 isolation level, LSO; v5 log start offset; v7
// sessions; v9 current leader epoch; v11 rack, preferred read replica;
// v12 flexible, last fetched epoch, diverging epoch; v13 topic ids; v15
// ReplicaState replaces ReplicaID; v16 leader hints (not sent).

func init() {
	register(api{key: 1, min: 4, max: 16, needs: needMetadata | needReplicas, handle: handleFetch, fail: failFetch})
}

// recordBatchHeaderBytes is the prefix that holds a batch's length: base
// offset (8) and batch length (4).
const recordBatchHeaderBytes = 12

func handleFetch(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	switch {
	case req.SessionID != 0:
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
	case req.SessionEpoch > 0:
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
	}
	if resp.ErrorCode != 0 {
		r.noteError(resp.ErrorCode)
		return resp, nil
	}

	replicaID, replicaEpoch := req.ReplicaID, int64(-1)
	if req.Version >= 15 {
		replicaID, replicaEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = s.opts.MaxRequestBytes
	}
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	var deadline <-chan time.Time
	if wait > 0 && req.MinBytes > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		deadline = timer.C
	}

	for {
		changed := s.backend.Replicas.Changed()
		img := s.backend.Metadata.Image()
		total, failed := s.fetchOnce(r, req, resp, img, replicaID, replicaEpoch, maxBytes)
		if failed || deadline == nil || total >= int(req.MinBytes) {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline:
		case <-s.shutdown:
		case <-r.ctx.Done():
		}
		// One last read: data may have arrived with the deadline.
		s.fetchOnce(r, req, resp, s.backend.Metadata.Image(), replicaID, replicaEpoch, maxBytes)
		break
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			r.noteError(resp.Topics[i].Partitions[j].ErrorCode)
		}
	}
	nonNullRecords(resp)
	return resp, nil
}

// nonNullRecords gives every partition an empty, not a null, record set:
// before v12 the field is nullable on the wire and librdkafka and
// kafka-python reject a null one ("invalid MessageSetSize -1"), as Kafka
// itself never sends it.
func nonNullRecords(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].RecordBatches == nil {
				resp.Topics[i].Partitions[j].RecordBatches = []byte{}
			}
		}
	}
}

// fetchOnce fills resp.Topics from a fresh read of every partition and
// returns the bytes read and whether any partition failed.
func (s *Server) fetchOnce(r *request, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, img *metadata.Image, replicaID int32, replicaEpoch int64, maxBytes int32) (int, bool) {
	resp.Topics = resp.Topics[:0]
	remaining := int(maxBytes)
	total := 0
	failed := false
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := t.Topic
		unknown := kerr.UnknownTopicOrPartition.Code
		if req.Version >= 13 {
			unknown = kerr.UnknownTopicID.Code
			name = ""
			if img != nil {
				if mt := img.TopicsByID[t.TopicID]; mt != nil {
					name = mt.Name
				}
			}
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			if name == "" || img.Partition(name, p.Partition) == nil {
				rp.ErrorCode = unknown
				if name != "" {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				failed = true
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			limit := min(int(p.PartitionMaxBytes), remaining)
			first := total == 0
			fp := replica.FetchPartition{
				ReplicaID:          replicaID,
				ReplicaEpoch:       replicaEpoch,
				CurrentLeaderEpoch: p.CurrentLeaderEpoch,
				FetchOffset:        p.FetchOffset,
				LastFetchedEpoch:   p.LastFetchedEpoch,
				LogStartOffset:     p.LogStartOffset,
				MaxBytes:           int32(max(limit, 0)),
				Isolation:          req.IsolationLevel,
			}
			if req.Version < 12 {
				fp.LastFetchedEpoch = -1
			}
			if req.Version < 9 {
				fp.CurrentLeaderEpoch = -1
			}
			res := s.backend.Replicas.Fetch(r.ctx, name, p.Partition, fp)
			rp.ErrorCode = res.ErrorCode
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
			rp.PreferredReadReplica = -1
			if res.DivergingEpoch != nil {
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch.Epoch, res.DivergingEpoch.EndOffset
			}
			// A diverging epoch is answered at once, as an error is: the
			// follower must truncate before anything else can happen.
			if res.ErrorCode != 0 || res.DivergingEpoch != nil {
				failed = true
			} else {
				rp.RecordBatches = trimBatches(res.Records, limit, first)
				for _, a := range res.AbortedTxns {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
					rp.AbortedTransactions = append(rp.AbortedTransactions, at)
				}
				total += len(rp.RecordBatches)
				remaining -= len(rp.RecordBatches)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return total, failed
}

// trimBatches returns the longest prefix of whole batches within limit
// bytes. With first set the first batch is kept whatever its size, so a
// batch larger than the fetch limits can still be consumed. A torn trailing
// batch is dropped.
func trimBatches(records []byte, limit int, first bool) []byte {
	pos := 0
	for pos+recordBatchHeaderBytes <= len(records) {
		size := recordBatchHeaderBytes + int(int32(binary.BigEndian.Uint32(records[pos+8:])))
		if size <= recordBatchHeaderBytes || pos+size > len(records) {
			break
		}
		if pos+size > limit && !(first && pos == 0) {
			break
		}
		pos += size
	}
	return records[:pos]
}

func failFetch(req kmsg.Request, code int16) kmsg.Response {
	freq := req.(*kmsg.FetchRequest)
	resp := freq.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	for _, t := range freq.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	nonNullRecords(resp)
	return resp
}
