package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/replica"
)

// WriteTxnMarkers: v0-v1
//
// Behaviour:
//   - Sent by transaction coordinators to partition leaders. Each marker
//     is appended to each of its partitions by TxnMarkers as a control
//     batch (COMMIT or ABORT, Kafka's control record format) and answered
//     once replicated (acks=all). Every marker is appended before any is
//     waited for, so the partitions replicate them together.
//   - A partition missing from the image is UNKNOWN_TOPIC_OR_PARTITION; a
//     marker from an older coordinator epoch than the partition has seen
//     for the producer TRANSACTION_COORDINATOR_FENCED; one for an older
//     producer epoch INVALID_PRODUCER_EPOCH.
//
// Version notes: v1 flexible. v2 (TransactionVersion) is not served.

func init() {
	register(api{key: 27, min: 0, max: 1, needs: needMetadata | needTxnMarkers, handle: handleWriteTxnMarkers, fail: failWriteTxnMarkers})
}

func handleWriteTxnMarkers(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	img := s.backend.Metadata.Image()
	var markers []replica.TxnMarker
	var slots []*int16
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if img.Partition(t.Topic, p) == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	// The response is built; its codes are filled in place.
	for i, m := range req.Markers {
		for j, t := range m.Topics {
			rt := &resp.Markers[i].Topics[j]
			for k, p := range t.Partitions {
				if rt.Partitions[k].ErrorCode != 0 {
					continue
				}
				markers = append(markers, replica.TxnMarker{Topic: t.Topic, Partition: p, ProducerID: m.ProducerID,
					ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch})
				slots = append(slots, &rt.Partitions[k].ErrorCode)
			}
		}
	}
	if len(markers) > 0 {
		codes := writeMarkers(s, r, markers)
		for i, code := range codes {
			*slots[i] = code
		}
	}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				r.noteError(p.ErrorCode)
			}
		}
	}
	return resp, nil
}

// writeMarkers writes the markers in one call, every one failed with
// UNKNOWN_SERVER_ERROR if the writer panics.
func writeMarkers(s *Server, r *request, markers []replica.TxnMarker) (codes []int16) {
	defer func() {
		if x := recover(); x != nil {
			codes = make([]int16, len(markers))
			for i := range codes {
				codes[i] = kerr.UnknownServerError.Code
			}
			_ = s.bug(x, "writing transaction markers")
		}
	}()
	return s.backend.TxnMarkers.WriteTxnMarkers(r.ctx, markers)
}

func failWriteTxnMarkers(req kmsg.Request, code int16) kmsg.Response {
	wreq := req.(*kmsg.WriteTxnMarkersRequest)
	resp := wreq.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range wreq.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
