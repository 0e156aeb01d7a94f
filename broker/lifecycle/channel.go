package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

// ControllerTransport carries requests from a broker to the active
// controller over the Kafka protocol. Send makes one attempt against the
// controller it believes active and returns that controller's answer; when
// the answer is NOT_CONTROLLER or the attempt fails, the next Send tries
// another controller. Callers retry (see SendToActive). Tests inject
// faults by wrapping or replacing it.
type ControllerTransport interface {
	Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// KgoTransportConfig configures a KgoTransport. Voters or Bootstrap (or
// both) must name at least one controller.
type KgoTransportConfig struct {
	// Voters maps controller node ids to their controller listener
	// host:port (controller.quorum.voters).
	Voters map[int32]string
	// Bootstrap lists controller listener addresses without ids
	// (controller.quorum.bootstrap.servers).
	Bootstrap []string
	// Leader, when set, names the quorum leader as this node knows it (a
	// controller or an observing broker): requests go to it first.
	Leader func() quorum.LeaderAndEpoch
	// ClientID names this node in the controllers' request logs.
	ClientID string
	// DialTimeout bounds connecting to a controller (default 5 s).
	DialTimeout time.Duration
	// Dial opens connections to controllers; nil uses franz-go's dialer.
	// Tests put a fault switch here.
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	Logger *slog.Logger
}

// KgoTransport is the production ControllerTransport: one franz-go client
// whose seed brokers are the controllers' listeners; each request goes
// straight to one of them (kgo Broker.Request), the known quorum leader
// first, otherwise the controllers in turn.
type KgoTransport struct {
	cl     *kgo.Client
	addrs  []string
	ids    map[int32]int // voter id -> index in addrs
	leader func() quorum.LeaderAndEpoch
	logger *slog.Logger

	mu      sync.Mutex
	next    int                   // the controller to try when no leader hint helps
	badHint quorum.LeaderAndEpoch // a leader hint that failed; not used again
}

// NewKgoTransport builds the transport; it connects lazily.
func NewKgoTransport(cfg KgoTransportConfig) (*KgoTransport, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	t := &KgoTransport{ids: map[int32]int{}, leader: cfg.Leader, logger: cfg.Logger, badHint: quorum.LeaderAndEpoch{LeaderID: -1}}
	ids := make([]int32, 0, len(cfg.Voters))
	for id := range cfg.Voters {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		t.ids[id] = len(t.addrs)
		t.addrs = append(t.addrs, cfg.Voters[id])
	}
	for _, a := range cfg.Bootstrap {
		if !slices.Contains(t.addrs, a) {
			t.addrs = append(t.addrs, a)
		}
	}
	if len(t.addrs) == 0 {
		return nil, errors.New("controller transport: no controller addresses (controller.quorum.voters or controller.quorum.bootstrap.servers)")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(t.addrs...), kgo.DialTimeout(cfg.DialTimeout)}
	if cfg.ClientID != "" {
		opts = append(opts, kgo.ClientID(cfg.ClientID))
	}
	if cfg.Dial != nil {
		opts = append(opts, kgo.Dialer(cfg.Dial))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("controller transport: %w", err)
	}
	t.cl = cl
	return t, nil
}

// Close closes the connections.
func (t *KgoTransport) Close() { t.cl.Close() }

// target picks the controller for the next attempt.
func (t *KgoTransport) target() (idx int, hint quorum.LeaderAndEpoch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leader != nil {
		l := t.leader()
		if i, ok := t.ids[l.LeaderID]; ok && l != t.badHint {
			return i, l
		}
	}
	return t.next % len(t.addrs), quorum.LeaderAndEpoch{LeaderID: -1}
}

// Send implements ControllerTransport.
func (t *KgoTransport) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	idx, hint := t.target()
	seeds := t.cl.SeedBrokers()
	if idx >= len(seeds) {
		return nil, fmt.Errorf("controller transport: no seed broker %d", idx)
	}
	resp, err := seeds[idx].Request(ctx, req)
	if err != nil || notControllerCode(resp) != 0 {
		t.mu.Lock()
		if hint.LeaderID >= 0 {
			t.badHint = hint
		} else {
			t.next = idx + 1
		}
		t.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("%s to controller %s: %w", kmsg.NameForKey(req.Key()), t.addrs[idx], err)
	}
	return resp, nil
}

// notControllerCode returns the NOT_CONTROLLER (or, for DescribeQuorum,
// NOT_LEADER_OR_FOLLOWER) code found in a controller's answer, 0 if none:
// the request must go to another controller.
func notControllerCode(resp kmsg.Response) int16 {
	nc := kerr.NotController.Code
	anyTopic := func(codes ...int16) int16 {
		if slices.Contains(codes, nc) {
			return nc
		}
		return 0
	}
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		codes := make([]int16, 0, len(r.Topics))
		for _, t := range r.Topics {
			codes = append(codes, t.ErrorCode)
		}
		return anyTopic(codes...)
	case *kmsg.DeleteTopicsResponse:
		codes := make([]int16, 0, len(r.Topics))
		for _, t := range r.Topics {
			codes = append(codes, t.ErrorCode)
		}
		return anyTopic(codes...)
	case *kmsg.CreatePartitionsResponse:
		codes := make([]int16, 0, len(r.Topics))
		for _, t := range r.Topics {
			codes = append(codes, t.ErrorCode)
		}
		return anyTopic(codes...)
	case *kmsg.ElectLeadersResponse:
		codes := []int16{r.ErrorCode}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		return anyTopic(codes...)
	case *kmsg.IncrementalAlterConfigsResponse:
		codes := make([]int16, 0, len(r.Resources))
		for _, res := range r.Resources {
			codes = append(codes, res.ErrorCode)
		}
		return anyTopic(codes...)
	case *kmsg.AlterConfigsResponse:
		codes := make([]int16, 0, len(r.Resources))
		for _, res := range r.Resources {
			codes = append(codes, res.ErrorCode)
		}
		return anyTopic(codes...)
	case *kmsg.InitProducerIDResponse:
		return anyTopic(r.ErrorCode)
	case *kmsg.BrokerRegistrationResponse:
		return anyTopic(r.ErrorCode)
	case *kmsg.BrokerHeartbeatResponse:
		return anyTopic(r.ErrorCode)
	case *kmsg.AlterPartitionResponse:
		return anyTopic(r.ErrorCode)
	case *kmsg.DescribeQuorumResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.NotLeaderForPartition.Code {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}

// Backoff between attempts to reach the active controller.
const (
	retryBackoffMin = 10 * time.Millisecond
	retryBackoffMax = 1 * time.Second
)

// SendToActive sends req until an answer comes from the active controller
// (one without NOT_CONTROLLER), backing off exponentially between attempts,
// within ctx (give it a deadline). On giving up it returns the last answer
// (NOT_CONTROLLER) if there was one, else the last error.
func SendToActive(ctx context.Context, tr ControllerTransport, req kmsg.Request) (kmsg.Response, error) {
	backoff := retryBackoffMin
	var last kmsg.Response
	var lastErr error
	for {
		resp, err := tr.Send(ctx, req)
		switch {
		case err == nil && notControllerCode(resp) == 0:
			return resp, nil
		case err == nil:
			last, lastErr = resp, nil
		default:
			lastErr = err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if last != nil && lastErr == nil {
				return last, nil
			}
			return nil, fmt.Errorf("no active controller answered %s: %w (last error: %w)", kmsg.NameForKey(req.Key()), ctx.Err(), lastErr)
		case <-timer.C:
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// ActiveController is a client of whichever controller is active: Request
// is SendToActive over Transport. It satisfies replica.BrokerClient, so a
// broker's AlterPartition sender (replica.KafkaISRSender) can use it; Close
// does nothing, the transport being shared.
type ActiveController struct {
	Transport ControllerTransport
}

// Request sends req to the active controller.
func (a ActiveController) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return SendToActive(ctx, a.Transport, req)
}

// Close does nothing.
func (ActiveController) Close() {}
