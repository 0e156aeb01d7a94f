package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-v8
//
// Behaviour:
//   - Handed to Groups.OffsetFetch, with the two request shapes made
//     uniform first: the single Group and Topics of v0-v7 are also put in
//     Groups (v8's batched form, null Topics meaning all), so Groups may
//     answer every version in Groups. For v0-v7 the server copies the one
//     group's answer back into the top-level fields unless Groups filled
//     them itself.
//   - Offsets are read from the group coordinator's state, which is
//     durable in __consumer_offsets; RequireStable (v7+) is Groups'.
//
// Version notes: v1 offsets from the log (not ZooKeeper); v2 top-level
// ErrorCode, null topics = all; v3 ThrottleMillis; v5 leader epoch; v6
// flexible; v7 RequireStable; v8 batched groups. v9+ (KIP-848 member
// epochs, topic ids) are not served.

func init() {
	register(api{key: 9, min: 0, max: 8, needs: needGroups, handle: handleOffsetFetch, fail: failOffsetFetch})
}

func handleOffsetFetch(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	if req.Version < 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = req.Group
		if req.Topics != nil {
			g.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic, gt.Partitions = t.Topic, t.Partitions
				g.Topics = append(g.Topics, gt)
			}
		}
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	}
	resp := s.backend.Groups.OffsetFetch(s.groupCtx(r), req)
	if resp == nil {
		return nil, errNoResponse
	}
	if req.Version < 8 && len(resp.Topics) == 0 && resp.ErrorCode == 0 && len(resp.Groups) == 1 {
		g := resp.Groups[0]
		resp.ErrorCode = g.ErrorCode
		for _, gt := range g.Topics {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = gt.Topic
			for _, gp := range gt.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	r.noteError(resp.ErrorCode)
	for _, g := range resp.Groups {
		r.noteError(g.ErrorCode)
	}
	return resp, nil
}

func failOffsetFetch(req kmsg.Request, code int16) kmsg.Response {
	oreq := req.(*kmsg.OffsetFetchRequest)
	resp := oreq.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = code
	for _, t := range oreq.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range oreq.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
