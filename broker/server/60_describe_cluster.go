package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-v2
//
// Behaviour:
//   - Answered from the metadata image: cluster id, a live ControllerID
//     (as in Metadata) and the unfenced brokers, or this node while the
//     image lists none.
//   - v1: EndpointType 1 (brokers) is served; 2 (controllers, KIP-919) is
//     UNSUPPORTED_ENDPOINT_TYPE: controllers are not reachable by clients
//     through a broker.
//   - v2: IncludeFencedBrokers adds fenced brokers, flagged IsFenced.
//   - Authorized operations are not computed.
//
// Version notes: v1 EndpointType; v2 fenced brokers.

func init() {
	register(api{key: 60, min: 0, max: 2, needs: needMetadata, handle: handleDescribeCluster, fail: failDescribeCluster})
}

func handleDescribeCluster(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.EndpointType = req.EndpointType
		r.noteError(resp.ErrorCode)
		return resp, nil
	}
	img := s.backend.Metadata.Image()
	resp.ClusterID = s.clusterID()
	live := s.liveBrokers(img, false)
	resp.ControllerID = s.controllerID(img, live)
	listed := live
	if req.Version >= 2 && req.IncludeFencedBrokers {
		listed = s.liveBrokers(img, true)
	}
	for _, b := range listed {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack, rb.IsFenced = b.ID, b.Host, b.Port, rackPtr(b.Rack), b.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}

func failDescribeCluster(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode, resp.ControllerID = code, -1
	return resp
}
