package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LocalController is this node's own controller as the Forwarder uses
// it: EnsureActive activates it if it has just become the quorum leader
// and reports whether it is the active controller, which then decides the
// request in process.
type LocalController interface {
	EnsureActive(ctx context.Context) bool
	CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse
	DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse
	CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse
	ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse
	IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse
	AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse
	InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse
	HandleDescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse
}

// DefaultForwardTimeout bounds a forwarded request whose own timeout is
// unknown (Kafka's request.timeout.ms).
const DefaultForwardTimeout = 30 * time.Second

// Forwarder implements server.Controller on a node that is not (or not
// always) the active controller: a broker-only node, or a controller
// standing by. Each admin request goes to the active controller over the
// Kafka protocol through Transport, retried on NOT_CONTROLLER and on
// network errors with backoff until the request's deadline (its
// TimeoutMillis, else the ctx deadline, else DefaultForwardTimeout). When
// Local is this node's controller and it is the active one, the request is
// decided locally without a network hop.
type Forwarder struct {
	Local     LocalController // nil on a broker-only node
	Transport ControllerTransport
	Logger    *slog.Logger
}

func (f *Forwarder) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

// forward runs attempts until one is answered by the active controller:
// locally when Local is active, else through the transport.
func (f *Forwarder) forward(ctx context.Context, timeoutMs int32, req kmsg.Request, local func(context.Context) kmsg.Response) (kmsg.Response, error) {
	timeout := DefaultForwardTimeout
	if timeoutMs > 0 {
		timeout = time.Duration(timeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := forwardTransport{f: f, local: local}
	return SendToActive(ctx, tr, req)
}

// forwardTransport tries the local controller first when it is active.
type forwardTransport struct {
	f     *Forwarder
	local func(context.Context) kmsg.Response
}

func (t forwardTransport) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if t.f.Local != nil && t.f.Local.EnsureActive(ctx) {
		return t.local(ctx), nil
	}
	if t.f.Transport == nil {
		return nil, errors.New("this node is not the active controller and has no controller transport")
	}
	return t.f.Transport.Send(ctx, req)
}

// failCode is the error a forwarded request gets when no active controller
// answered in time.
func (f *Forwarder) failCode(op string, err error) int16 {
	f.logger().Warn(fmt.Sprintf("Could not forward %s to the active controller", op), "err", err)
	return kerr.RequestTimedOut.Code
}

// CreateTopics implements server.Controller.
func (f *Forwarder) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	fwd := *req
	resp, err := f.forward(ctx, req.TimeoutMillis, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.CreateTopics(ctx, req) })
	if r, ok := resp.(*kmsg.CreateTopicsResponse); ok && err == nil {
		return r
	}
	code := f.failCode("CreateTopics", err)
	out := kmsg.NewPtrCreateTopicsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, -1, -1
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// DeleteTopics implements server.Controller.
func (f *Forwarder) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	fwd := *req
	resp, err := f.forward(ctx, req.TimeoutMillis, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.DeleteTopics(ctx, req) })
	if r, ok := resp.(*kmsg.DeleteTopicsResponse); ok && err == nil {
		return r
	}
	code := f.failCode("DeleteTopics", err)
	out := kmsg.NewPtrDeleteTopicsResponse()
	for _, n := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = &n, code
		out.Topics = append(out.Topics, rt)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// CreatePartitions implements server.Controller.
func (f *Forwarder) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	fwd := *req
	resp, err := f.forward(ctx, req.TimeoutMillis, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.CreatePartitions(ctx, req) })
	if r, ok := resp.(*kmsg.CreatePartitionsResponse); ok && err == nil {
		return r
	}
	code := f.failCode("CreatePartitions", err)
	out := kmsg.NewPtrCreatePartitionsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// ElectLeaders implements server.Controller.
func (f *Forwarder) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	fwd := *req
	resp, err := f.forward(ctx, req.TimeoutMillis, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.ElectLeaders(ctx, req) })
	if r, ok := resp.(*kmsg.ElectLeadersResponse); ok && err == nil {
		return r
	}
	code := f.failCode("ElectLeaders", err)
	out := kmsg.NewPtrElectLeadersResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	if req.Topics == nil {
		out.ErrorCode = code
	}
	return out
}

// IncrementalAlterConfigs implements server.Controller.
func (f *Forwarder) IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	fwd := *req
	resp, err := f.forward(ctx, 0, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.IncrementalAlterConfigs(ctx, req) })
	if r, ok := resp.(*kmsg.IncrementalAlterConfigsResponse); ok && err == nil {
		return r
	}
	code := f.failCode("IncrementalAlterConfigs", err)
	out := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		out.Resources = append(out.Resources, rr)
	}
	return out
}

// AlterConfigs implements server.Controller.
func (f *Forwarder) AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	fwd := *req
	resp, err := f.forward(ctx, 0, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.AlterConfigs(ctx, req) })
	if r, ok := resp.(*kmsg.AlterConfigsResponse); ok && err == nil {
		return r
	}
	code := f.failCode("AlterConfigs", err)
	out := kmsg.NewPtrAlterConfigsResponse()
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
		out.Resources = append(out.Resources, rr)
	}
	return out
}

// InitProducerID implements server.Controller.
func (f *Forwarder) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	fwd := *req
	resp, err := f.forward(ctx, 0, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.InitProducerID(ctx, req) })
	if r, ok := resp.(*kmsg.InitProducerIDResponse); ok && err == nil {
		return r
	}
	out := kmsg.NewPtrInitProducerIDResponse()
	out.ErrorCode, out.ProducerID, out.ProducerEpoch = f.failCode("InitProducerId", err), -1, -1
	return out
}

// DescribeQuorum forwards DescribeQuorum to the quorum leader (for a broker
// that does not lead the quorum), or answers it locally when Local leads.
func (f *Forwarder) DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	fwd := *req
	resp, err := f.forward(ctx, 0, &fwd, func(ctx context.Context) kmsg.Response { return f.Local.HandleDescribeQuorum(ctx, req) })
	if r, ok := resp.(*kmsg.DescribeQuorumResponse); ok && err == nil {
		return r
	}
	out := kmsg.NewPtrDescribeQuorumResponse()
	out.ErrorCode = f.failCode("DescribeQuorum", err)
	return out
}
