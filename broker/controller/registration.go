package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// BrokerRegistration is what a broker sends to register (Kafka's
// BrokerRegistrationRequest, the parts we use).
type BrokerRegistration struct {
	BrokerID      int32
	IncarnationID metadata.Uuid
	Endpoints     []metadata.Endpoint
	Rack          string
}

// RegisterBroker registers a broker incarnation. The broker starts fenced;
// its epoch is the offset its RegisterBroker record will get when the
// records are appended right after the image's last offset (epochs grow
// with every registration either way). A new incarnation of a known broker
// first loses its leaderships and ISR places as if fenced, so that a broker
// that restarted with a possibly shorter log never leads on stale
// authority. A repeated registration of the same incarnation returns its
// epoch and changes nothing.
func (s *ClusterState) RegisterBroker(reg BrokerRegistration) (int64, Result, error) {
	im := s.Image
	if reg.BrokerID < 0 {
		return 0, Result{}, fmt.Errorf("register broker %d: broker ids are not negative", reg.BrokerID)
	}
	old, known := im.Brokers[reg.BrokerID]
	if known && old.IncarnationID == reg.IncarnationID {
		return old.Epoch, Result{Image: im}, nil
	}
	epoch := im.Offset + 1
	if known && epoch <= old.Epoch {
		epoch = old.Epoch + 1
	}
	rec := &metadata.RegisterBrokerRecord{
		BrokerID:      reg.BrokerID,
		IncarnationID: reg.IncarnationID,
		BrokerEpoch:   epoch,
		Endpoints:     slices.Clone(reg.Endpoints),
		Fenced:        true,
	}
	if reg.Rack != "" {
		rack := reg.Rack
		rec.Rack = &rack
	}
	recs := []metadata.Record{rec}
	next, err := im.Apply(rec)
	if err != nil {
		return 0, Result{}, fmt.Errorf("register broker %d: %w", reg.BrokerID, err)
	}
	if known && !s.Unsafe.UncleanRestartKeepsISR {
		recs = append(recs, s.removeFromPartitions(next, reg.BrokerID)...)
	}
	next, err = im.ApplyBatch(im.Offset, recs)
	if err != nil {
		return 0, Result{}, fmt.Errorf("register broker %d: %w", reg.BrokerID, err)
	}
	return epoch, Result{Records: recs, Image: next}, nil
}

// RegisterBroker registers a broker incarnation (BrokerRegistration) and
// returns its broker epoch.
func (c *Controller) RegisterBroker(ctx context.Context, reg BrokerRegistration) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	epoch, res, err := c.state().RegisterBroker(reg)
	if err != nil {
		return 0, err
	}
	if err := c.commit(ctx, res.Records); err != nil {
		return 0, err
	}
	return epoch, nil
}

// HandleBrokerRegistration registers a broker incarnation and answers its
// broker epoch. A different incarnation of a broker whose session is alive
// gets DUPLICATE_BROKER_REGISTRATION, unless it names the registered epoch
// as its PreviousBrokerEpoch (it is that broker, restarted cleanly); a
// wrong cluster id gets INCONSISTENT_CLUSTER_ID.
func (c *Controller) HandleBrokerRegistration(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	resp.BrokerEpoch = -1
	if !c.EnsureActive(ctx) {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	if c.cfg.ClusterID != "" && req.ClusterID != c.cfg.ClusterID {
		c.logger.Warn(fmt.Sprintf("Refused registration of broker %d: cluster id %q is not this cluster's %q", req.BrokerID, req.ClusterID, c.cfg.ClusterID))
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	reg := BrokerRegistration{BrokerID: req.BrokerID, IncarnationID: metadata.Uuid(req.IncarnationID)}
	if req.Rack != nil {
		reg.Rack = *req.Rack
	}
	for _, l := range req.Listeners {
		reg.Endpoints = append(reg.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	prev := int64(-1)
	if req.Version >= 3 {
		prev = req.PreviousBrokerEpoch
	}
	epoch, code, err := c.registerChecked(ctx, reg, prev)
	switch {
	case err != nil:
		resp.ErrorCode, _ = failureCode(err)
		c.logger.Error(fmt.Sprintf("Registration of broker %d failed", req.BrokerID), "err", err)
	case code != 0:
		resp.ErrorCode = code
	default:
		resp.BrokerEpoch = epoch
	}
	return resp
}

// registerChecked is RegisterBroker behind the duplicate check; a new
// registration starts the broker's session. With
// unsafe.unclean.restart.keeps.isr a new incarnation is taken for the old
// one: it is let in at once, whatever its previous epoch says about how
// the old one ended, and (RegisterBroker) keeps its ISR places.
func (c *Controller) registerChecked(ctx context.Context, reg BrokerRegistration, previousEpoch int64) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nowMs := c.cfg.Now().UnixMilli()
	if reg.BrokerID < 0 {
		return 0, kerr.InvalidRegistration.Code, nil
	}
	if old, ok := c.Image().Brokers[reg.BrokerID]; ok && old.IncarnationID != reg.IncarnationID && !c.cfg.Unsafe.UncleanRestartKeepsISR &&
		previousEpoch != old.Epoch && c.sessions.Alive(reg.BrokerID, nowMs, c.sessionTimeoutMs.Load()) {
		c.logger.Warn(fmt.Sprintf("Refused registration of broker %d: incarnation %x is not the registered %x, whose session is still alive",
			reg.BrokerID, reg.IncarnationID[:], old.IncarnationID[:]))
		return 0, kerr.DuplicateBrokerRegistration.Code, nil
	}
	epoch, res, err := c.state().RegisterBroker(reg)
	if err != nil {
		return 0, kerr.InvalidRegistration.Code, nil
	}
	if err := c.commit(ctx, res.Records); err != nil {
		return 0, 0, err
	}
	c.sessions.Touch(reg.BrokerID, nowMs)
	if len(res.Records) > 0 {
		c.logger.Info(fmt.Sprintf("Registered broker %d (incarnation %x) at broker epoch %d", reg.BrokerID, reg.IncarnationID[:], epoch))
	}
	return epoch, 0, nil
}
