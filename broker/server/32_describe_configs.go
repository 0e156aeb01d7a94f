package server

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-v4
//
// Behaviour:
//   - Broker resources (type 4) named "" or this node's id get
//     ConfigSource.BrokerConfigs(); another broker's id is INVALID_REQUEST
//     (ask that broker, as kadm does).
//   - Topic resources (type 2) get ConfigSource.TopicConfigs(name), or
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - Other resource types (broker loggers, ...) are INVALID_REQUEST.
//   - ConfigNames, when not null, keeps only the named configs.
//   - Synonyms (v1+) and documentation (v3+) are not reported; config
//     types (v3+) are UNKNOWN.
//
// Version notes: v1 synonyms, config source; v2 nothing new; v3 config
// type and documentation; v4 flexible.

func init() {
	register(api{key: 32, min: 0, max: 4, needs: needConfigs | needMetadata, handle: handleDescribeConfigs, fail: failDescribeConfigs})
}

func handleDescribeConfigs(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		var entries []ConfigEntry
		switch res.ResourceType {
		case kmsg.ConfigResourceTypeBroker:
			if res.ResourceName != "" && res.ResourceName != strconv.Itoa(int(s.backend.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				msg := "describe broker " + res.ResourceName + " on that broker"
				rr.ErrorMessage = &msg
				break
			}
			entries = s.backend.Configs.BrokerConfigs()
		case kmsg.ConfigResourceTypeTopic:
			var ok bool
			if entries, ok = s.backend.Configs.TopicConfigs(res.ResourceName); !ok {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + res.ResourceType.String()
			rr.ErrorMessage = &msg
		}
		r.noteError(rr.ErrorCode)
		rr.Configs = configEntries(entries, res.ConfigNames)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// configEntries converts entries, keeping only names when it is not nil.
func configEntries(entries []ConfigEntry, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	var keep map[string]bool
	if names != nil {
		keep = make(map[string]bool, len(names))
		for _, n := range names {
			keep[n] = true
		}
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
	for _, e := range entries {
		if keep != nil && !keep[e.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.ReadOnly, c.IsDefault, c.IsSensitive = e.Name, e.ReadOnly, e.IsDefault, e.Sensitive
		c.Source = kmsg.ConfigSource(e.Source)
		if !e.Sensitive {
			c.Value = e.Value
		}
		out = append(out, c)
	}
	return out
}

func failDescribeConfigs(req kmsg.Request, code int16) kmsg.Response {
	dreq := req.(*kmsg.DescribeConfigsRequest)
	resp := dreq.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range dreq.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
