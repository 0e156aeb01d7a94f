package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-v4
//
// Behaviour:
//   - Handed to Groups.FindCoordinator. The server makes the two request
//     shapes uniform first: the single CoordinatorKey of v0-v3 is also put
//     in CoordinatorKeys, so Groups may answer every version in
//     Coordinators (one entry per key, v4's batched form, KIP-699). For
//     v0-v3 the server then copies the first entry into the top-level
//     fields unless Groups filled them itself.
//   - Transaction coordinators (CoordinatorType 1) are found by Txns
//     (the leader of the id's __transaction_state partition, the topic
//     created on first use); without Txns they are Groups' to refuse
//     (COORDINATOR_NOT_AVAILABLE).
//
// Version notes: v1 CoordinatorType, ErrorMessage; v2 nothing new; v3
// flexible; v4 batched keys. v5 (KIP-890) and v6 (share groups) are not
// served.

func init() {
	register(api{key: 10, min: 0, max: 4, needs: needGroups, handle: handleFindCoordinator, fail: failFindCoordinator})
}

func handleFindCoordinator(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	if req.Version < 4 {
		req.CoordinatorKeys = []string{req.CoordinatorKey}
	}
	var resp *kmsg.FindCoordinatorResponse
	if req.CoordinatorType == 1 && s.backend.Txns != nil {
		resp = s.backend.Txns.FindCoordinator(r.ctx, req)
	} else {
		resp = s.backend.Groups.FindCoordinator(s.groupCtx(r), req)
	}
	if resp == nil {
		return nil, errNoResponse
	}
	if req.Version < 4 && resp.Host == "" && resp.ErrorCode == 0 && len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
	}
	r.noteError(resp.ErrorCode)
	for _, c := range resp.Coordinators {
		r.noteError(c.ErrorCode)
	}
	return resp, nil
}

func failFindCoordinator(req kmsg.Request, code int16) kmsg.Response {
	freq := req.(*kmsg.FindCoordinatorRequest)
	resp := freq.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID = code, -1
	for _, k := range freq.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.ErrorCode = k, -1, code
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
