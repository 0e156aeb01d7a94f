package server

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteTxnMarkers: v0-v1
//
// Behaviour:
//   - Sent by transaction coordinators to partition leaders. Each marker
//     is appended to each of its partitions by TxnMarkers as a control
//     batch (COMMIT or ABORT, Kafka's control record format) and answered
//     once replicated (acks=all). Partitions are written concurrently.
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
	var wg sync.WaitGroup
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for i, p := range t.Partitions {
				rp := &rt.Partitions[i]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if img.Partition(t.Topic, p) == nil {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() {
						if x := recover(); x != nil {
							rp.ErrorCode = kerr.UnknownServerError.Code
							_ = s.bug(x, "writing a transaction marker to "+t.Topic)
						}
					}()
					rp.ErrorCode = s.backend.TxnMarkers.WriteTxnMarker(r.ctx, t.Topic, p, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch)
				}()
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	wg.Wait()
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				r.noteError(p.ErrorCode)
			}
		}
	}
	return resp, nil
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
