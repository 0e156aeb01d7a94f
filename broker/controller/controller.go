package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
	"github.com/faultline/faultline/broker/quorum"
)

// Config configures a Controller.
type Config struct {
	NodeID         int32
	ClusterID      string
	Defaults       Defaults
	ValidateConfig ConfigValidator // nil accepts every topic config
	ValidateTopic  TopicValidator  // nil accepts every set of overrides
	Logger         *slog.Logger
	// Rand draws topic ids and placement offsets; nil seeds one from the
	// clock.
	Rand *rand.Rand
	// Now is the clock of broker sessions (default time.Now).
	Now func() time.Time
	// Cluster makes the controller decide only once activated in the
	// current quorum epoch (see Active) and answer NOT_CONTROLLER to
	// everything while standing by, as every node's controller does
	// (RunExpiry sets it too). Off, it decides whenever its node leads
	// the quorum: the unit tests' single-voter quorumtest.Local.
	Cluster bool
	// Unsafe are the planted bugs of the controller's decisions; the zero
	// value is the safe controller.
	Unsafe Unsafe
	// VoterEndpoints are the voters' controller listeners as configured
	// (controller.quorum.voters), listed in DescribeQuorum v2's Nodes so a
	// tool that reached a follower can find the quorum leader.
	VoterEndpoints []VoterEndpoint
}

// VoterEndpoint is a voter's controller listener.
type VoterEndpoint struct {
	NodeID   int32
	Listener string
	Host     string
	Port     int32
}

// Controller is the active controller: it decides with a ClusterState and
// writes the records through the quorum, one decision at a time. Its image
// follows the committed metadata log. It implements server.Controller.
type Controller struct {
	cfg    Config
	q      quorum.Quorum
	logger *slog.Logger

	mu       sync.Mutex // one decision at a time; guards rand, the producer id block and sessions
	pidNext  int64
	pidEnd   int64
	sessions Sessions

	imageMu sync.Mutex
	image   *metadata.Image
	applied chan struct{} // closed and replaced when image advances

	// cluster is set by RunExpiry: decisions then wait for activation
	// (a committed NoOp in the current quorum epoch, see activate).
	cluster atomic.Bool
	// activeEpoch is the quorum epoch this controller activated in, -1
	// for none; written under mu.
	activeEpoch atomic.Int64
	// sessionTimeoutMs is broker.session.timeout.ms as RunExpiry uses it,
	// also the liveness bound of DUPLICATE_BROKER_REGISTRATION.
	sessionTimeoutMs atomic.Int64
	// prevLeader is the last quorum leader other than this controller that
	// it saw, -1 for none: at activation its broker is presumed dead.
	prevLeader atomic.Int32

	cancel func()
}

// ErrNotCaughtUp: the controller's image did not reach an offset in time.
var ErrNotCaughtUp = errors.New("controller image behind the metadata log")

// New replays the quorum's committed log into the controller's image and
// follows it from then on.
func New(cfg Config, q quorum.Quorum) (*Controller, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		cfg.Rand = rand.New(rand.NewPCG(seed, seed>>7|1))
	}
	c := &Controller{cfg: cfg, q: q, logger: cfg.Logger, image: metadata.NewImage(cfg.ClusterID), applied: make(chan struct{})}
	c.activeEpoch.Store(-1)
	c.prevLeader.Store(-1)
	c.cluster.Store(cfg.Cluster)
	c.sessionTimeoutMs.Store(DefaultSessionTimeout.Milliseconds())
	cancel, err := q.Subscribe(c.applyCommitted)
	if err != nil {
		return nil, fmt.Errorf("controller: replay metadata log: %w", err)
	}
	c.cancel = cancel
	im := c.Image()
	c.logger.Info(fmt.Sprintf("Controller %d replayed the metadata log up to offset %d: %d broker(s), %d topic(s)", cfg.NodeID, im.Offset, len(im.Brokers), len(im.Topics)))
	return c, nil
}

func (c *Controller) applyCommitted(b quorum.Batch) error {
	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	next, err := c.image.ApplyBatch(b.LastOffset, b.Records)
	if err != nil {
		return err
	}
	next.ControllerID = c.q.Leader().LeaderID
	c.noteLeader()
	c.image = next
	close(c.applied)
	c.applied = make(chan struct{})
	return nil
}

// Image is the controller's view: the committed metadata log.
func (c *Controller) Image() *metadata.Image {
	c.imageMu.Lock()
	defer c.imageMu.Unlock()
	return c.image
}

// Close stops following the log.
func (c *Controller) Close() {
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *Controller) state() *ClusterState {
	return &ClusterState{Image: c.Image(), Defaults: c.cfg.Defaults, ValidateConfig: c.cfg.ValidateConfig, ValidateTopic: c.cfg.ValidateTopic, Rand: c.cfg.Rand, Unsafe: c.cfg.Unsafe}
}

// commit appends records and waits until the controller's image holds them.
// Callers hold c.mu.
func (c *Controller) commit(ctx context.Context, recs []metadata.Record) error {
	if len(recs) == 0 {
		return nil
	}
	l := c.q.Leader()
	if l.LeaderID != c.cfg.NodeID {
		return fmt.Errorf("controller %d: leader is %d: %w", c.cfg.NodeID, l.LeaderID, quorum.ErrNotLeader)
	}
	if c.cluster.Load() && c.activeEpoch.Load() != int64(l.Epoch) {
		return fmt.Errorf("controller %d: not yet active in epoch %d: %w", c.cfg.NodeID, l.Epoch, quorum.ErrNotLeader)
	}
	last, err := c.q.Append(ctx, recs)
	if err != nil {
		return fmt.Errorf("controller: append %d record(s): %w", len(recs), err)
	}
	return c.waitApplied(ctx, last)
}

// waitApplied waits until the controller's image holds offset last.
func (c *Controller) waitApplied(ctx context.Context, last int64) error {
	for {
		c.imageMu.Lock()
		off, ch := c.image.Offset, c.applied
		c.imageMu.Unlock()
		if off >= last {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("controller: wait for offset %d: %w: %w", last, ErrNotCaughtUp, ctx.Err())
		}
	}
}

// failureCode maps a commit failure to the error code clients see.
func failureCode(err error) (int16, string) {
	switch {
	case errors.Is(err, quorum.ErrNotLeader):
		return kerr.NotController.Code, "this node is not the active controller"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, "timed out waiting for the metadata log to commit"
	default:
		return kerr.UnknownServerError.Code, err.Error()
	}
}

// requestContext bounds an admin request by its TimeoutMillis, as Kafka's
// controller makes timeoutMs the deadline of the operation: a quorum leader
// that cannot commit (cut off from the other voters, before it notices
// and steps down) answers REQUEST_TIMED_OUT in time instead of holding the
// request, and c.mu, until the client goes away.
func requestContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	if timeoutMs <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
}

// CreateTopics implements server.Controller.
func (c *Controller) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	if c.standingBy(ctx) {
		resp := kmsg.NewPtrCreateTopicsResponse()
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, kerr.NotController.Code, -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, res, warnings := c.state().CreateTopics(req)
	for _, w := range warnings {
		c.logger.Warn(w)
	}
	if err := c.commit(ctx, res.Records); err != nil {
		code, msg := failureCode(err)
		c.logger.Error("CreateTopics failed to commit", "err", err)
		for i := range resp.Topics {
			if resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = code, &msg
			}
		}
		return resp
	}
	if !req.ValidateOnly {
		for _, t := range resp.Topics {
			if t.ErrorCode == 0 {
				c.logger.Info(fmt.Sprintf("Created topic %s with %d partition(s) and replication factor %d", t.Topic, t.NumPartitions, t.ReplicationFactor))
			}
		}
	}
	return resp
}

// commitIfActive commits a decision's records when this controller is
// active. Otherwise it returns the code and message the decision's items
// must carry instead: all of them when standing by (nothing was decided
// here: NOT_CONTROLLER), those that had succeeded when the commit failed.
func (c *Controller) commitIfActive(ctx context.Context, active bool, recs []metadata.Record) (code int16, msg string, all, ok bool) {
	if !active {
		code, msg = failureCode(quorum.ErrNotLeader)
		return code, msg, true, false
	}
	if err := c.commit(ctx, recs); err != nil {
		code, msg = failureCode(err)
		return code, msg, false, false
	}
	return 0, "", false, true
}

// DeleteTopics implements server.Controller.
func (c *Controller) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	active := !c.standingBy(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, res := c.state().DeleteTopics(req)
	if code, msg, all, ok := c.commitIfActive(ctx, active, res.Records); !ok {
		for i := range resp.Topics {
			if all || resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = code, &msg
			}
		}
		return resp
	}
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil {
			c.logger.Info(fmt.Sprintf("Deleted topic %s", *t.Topic))
		}
	}
	return resp
}

// CreatePartitions implements server.Controller.
func (c *Controller) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	active := !c.standingBy(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, res := c.state().CreatePartitions(req)
	if code, msg, all, ok := c.commitIfActive(ctx, active, res.Records); !ok {
		for i := range resp.Topics {
			if all || resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = code, &msg
			}
		}
	}
	return resp
}

// ElectLeaders implements server.Controller: the elections
// ClusterState.ElectLeaders decides, committed before it answers.
func (c *Controller) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	active := !c.standingBy(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, res := c.state().ElectLeaders(req)
	if code, msg, all, ok := c.commitIfActive(ctx, active, res.Records); !ok {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; all || p.ErrorCode == 0 {
					p.ErrorCode, p.ErrorMessage = code, &msg
				}
			}
		}
		return resp
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				c.logger.Info(fmt.Sprintf("Elected a new leader for %s-%d (election type %d)", t.Topic, p.Partition, req.ElectionType))
			}
		}
	}
	return resp
}

// alterConfigsTimeout bounds AlterConfigs and IncrementalAlterConfigs,
// which carry no timeout of their own (Kafka's request.timeout.ms).
const alterConfigsTimeout = 30 * time.Second

// IncrementalAlterConfigs implements server.Controller: the config
// changes ClusterState.IncrementalAlterConfigs decides, committed before it
// answers.
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	return incrementalAlterAnswer(req, c.alterConfigs(ctx, incrementalAlterations(req), req.ValidateOnly))
}

// AlterConfigs implements server.Controller: the legacy request, each
// resource's configs its whole set of overrides.
func (c *Controller) AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	return legacyAlterAnswer(req, c.alterConfigs(ctx, legacyAlterations(req), req.ValidateOnly))
}

// alterConfigs decides alts and commits the decision; the resources that
// succeeded carry the commit's failure when it fails.
func (c *Controller) alterConfigs(ctx context.Context, alts []configAlteration, validateOnly bool) []configOutcome {
	// The requests carry no timeout: bound the decision as a forwarded
	// request is bounded, so that a quorum that cannot commit does not
	// hold c.mu until the client goes away.
	ctx, cancel := context.WithTimeout(ctx, alterConfigsTimeout)
	defer cancel()
	active := !c.standingBy(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	outs, res := c.state().alterConfigs(alts, validateOnly)
	if code, msg, all, ok := c.commitIfActive(ctx, active, res.Records); !ok {
		for i := range outs {
			if all || outs[i].code == 0 {
				outs[i] = configOutcome{code: code, msg: &msg}
			}
		}
		return outs
	}
	for i, a := range alts {
		if outs[i].code == 0 && !validateOnly {
			c.logger.Info(fmt.Sprintf("Altered the configs of %s %s", a.typ, a.name))
		}
	}
	return outs
}

// InitProducerID implements server.Controller for idempotent producers: a
// fresh producer id at epoch 0, from a block of ProducerIDBlockSize ids
// reserved in the metadata log, so no id is handed out twice even across
// restarts (the unused rest of a block is skipped after a restart).
// Transactional ids are not supported: INVALID_REQUEST.
func (c *Controller) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if c.standingBy(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	id, err := c.nextProducerID(ctx)
	if err != nil {
		resp.ErrorCode, _ = failureCode(err)
		c.logger.Error("InitProducerId failed", "err", err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}

func (c *Controller) nextProducerID(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pidNext >= c.pidEnd {
		im := c.Image()
		epoch := int64(-1)
		if b, ok := im.Brokers[c.cfg.NodeID]; ok {
			epoch = b.Epoch
		}
		start, res, err := c.state().AllocateProducerIDs(c.cfg.NodeID, epoch)
		if err != nil {
			return 0, err
		}
		if err := c.commit(ctx, res.Records); err != nil {
			return 0, err
		}
		c.pidNext, c.pidEnd = start, start+ProducerIDBlockSize
	}
	id := c.pidNext
	c.pidNext++
	return id, nil
}
