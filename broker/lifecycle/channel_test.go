package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNotControllerCode: every answer a forwarded request can get from a
// standby controller is recognised as NOT_CONTROLLER, so the request goes
// to another controller instead of to the client.
func TestNotControllerCode(t *testing.T) {
	nc := kerr.NotController.Code
	elect := func(top, part int16) kmsg.Response {
		r := kmsg.NewPtrElectLeadersResponse()
		r.ErrorCode = top
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Partitions = []kmsg.ElectLeadersResponseTopicPartition{{ErrorCode: 0}, {ErrorCode: part}}
		r.Topics = append(r.Topics, rt)
		return r
	}
	incremental := func(codes ...int16) kmsg.Response {
		r := kmsg.NewPtrIncrementalAlterConfigsResponse()
		for _, c := range codes {
			r.Resources = append(r.Resources, kmsg.IncrementalAlterConfigsResponseResource{ErrorCode: c})
		}
		return r
	}
	legacy := func(codes ...int16) kmsg.Response {
		r := kmsg.NewPtrAlterConfigsResponse()
		for _, c := range codes {
			r.Resources = append(r.Resources, kmsg.AlterConfigsResponseResource{ErrorCode: c})
		}
		return r
	}
	for _, tc := range []struct {
		what string
		resp kmsg.Response
		want int16
	}{
		{"ElectLeaders, top level", elect(nc, 0), nc},
		{"ElectLeaders, a partition", elect(0, nc), nc},
		{"ElectLeaders, answered", elect(0, kerr.ElectionNotNeeded.Code), 0},
		{"IncrementalAlterConfigs", incremental(0, nc), nc},
		{"IncrementalAlterConfigs, answered", incremental(0, kerr.InvalidConfig.Code), 0},
		{"AlterConfigs", legacy(nc), nc},
		{"AlterConfigs, answered", legacy(kerr.UnknownTopicOrPartition.Code), 0},
		{"InitProducerId", &kmsg.InitProducerIDResponse{ErrorCode: nc}, nc},
	} {
		assert.Equal(t, tc.want, notControllerCode(tc.resp), tc.what)
	}
}
