package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum: v0-v2
//
// Behaviour:
//   - On a controller listener, handed to ControllerAPIs.HandleDescribeQuorum:
//     the quorum's leader id and epoch, high watermark, and each voter's and
//     observer's log end offset (what `broker quorum describe --status`
//     prints). A node that does not lead the quorum answers
//     NOT_LEADER_OR_FOLLOWER.
//   - On a broker listener, forwarded to the quorum leader by the broker's
//     Controller (a QuorumDescriber), as Kafka's brokers do for
//     `kafka-metadata-quorum.sh --bootstrap-server`.
//
// Version notes: v1 adds the last fetch / caught-up timestamps; v2 node
// endpoints and directory ids.

func init() {
	register(api{key: 55, min: 0, max: 2, needs: needQuorum, handle: handleDescribeQuorum, fail: failDescribeQuorum})
}

func handleDescribeQuorum(s *Server, r *request) (kmsg.Response, error) {
	resp := s.backend.quorumDescriber().DescribeQuorum(r.ctx, r.kreq.(*kmsg.DescribeQuorumRequest))
	if resp == nil {
		return nil, errNoResponse
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failDescribeQuorum(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.ErrorCode = code
	return resp
}
